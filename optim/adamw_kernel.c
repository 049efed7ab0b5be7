/* AdamW's update for float32 tensors on the CPU, every tensor of a parameter group in one call.
 *
 * The same update as `adamw_update` in optim/adamw.py (equations 2-7 of its docstring), written with the
 * same float operations in the same order, so it agrees with the readable path and with torch.optim.AdamW
 * to float rounding (tests/test_adamw.py holds it to that). Why C, when the lesson is the Python:
 *
 * - One pass over memory. Each element of the weights, the gradient and the two moments is read once
 *   and written once; the readable path makes about eight passes, one per tensor operation.
 * - One OpenMP parallel region per group. torch's fused AdamW and our torch.compile'd path start one per
 *   tensor (199 of them for bert-base), and each start and end makes the threads wait for one another;
 *   here each thread takes its share of every tensor and moves on without waiting ("nowait").
 *
 * optim/fast_adamw.py compiles this file with the system C compiler on first use, caches the library and
 * calls it through ctypes. It is left out of the student handout: it restates the exercise's answer.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

void adamw_group_step(
    int64_t count,                    /* number of tensors */
    float *const *params,             /* count pointers: the weights theta, updated in place */
    const float *const *grads,        /* the gradients g */
    float *const *exp_avgs,           /* the first moments m, updated in place */
    float *const *exp_avg_sqs,        /* the second moments v, updated in place */
    float *const *max_exp_avg_sqs,    /* amsgrad's running maxima of v, updated in place; NULL without amsgrad */
    const int64_t *sizes,             /* numbers of elements */
    const float *step_sizes,          /* per tensor: lr / (1 - beta1^t), t being that tensor's step */
    const float *sqrt_c2s,            /* per tensor: sqrt(1 - beta2^t) */
    float decay,                      /* 1 - lr * weight_decay */
    float one_minus_beta1,
    float beta2,
    float one_minus_beta2,
    float eps,
    int threads)
{
    #pragma omp parallel num_threads(threads)
    for (int64_t t = 0; t < count; t++) {
        float *restrict param = params[t];
        const float *restrict grad = grads[t];
        float *restrict exp_avg = exp_avgs[t];
        float *restrict exp_avg_sq = exp_avg_sqs[t];
        float *restrict max_exp_avg_sq = max_exp_avg_sqs == NULL ? NULL : max_exp_avg_sqs[t];
        const float step_size = step_sizes[t], sqrt_c2 = sqrt_c2s[t];

        #pragma omp for schedule(static) nowait
        for (int64_t i = 0; i < sizes[t]; i++) {
            const float g = grad[i];
            const float theta = param[i] * decay;                          /* 2. decoupled weight decay */
            /* 3. m + (1 - beta1)(g - m): torch's lerp, which rounds the multiply-add once (an FMA). */
            const float m = fmaf(one_minus_beta1, g - exp_avg[i], exp_avg[i]);
            /* 4. beta2 v, then + (1 - beta2) g g as torch's addcmul does it, also one FMA. */
            const float v = fmaf(one_minus_beta2 * g, g, exp_avg_sq[i] * beta2);
            exp_avg[i] = m;
            exp_avg_sq[i] = v;
            float v_used = v;
            if (max_exp_avg_sq != NULL) {                                   /* 5. amsgrad */
                const float old = max_exp_avg_sq[i];
                v_used = (old >= v || isnan(old)) ? old : v;               /* torch.maximum keeps NaN */
                max_exp_avg_sq[i] = v_used;
            }
            const float denom = sqrtf(v_used) / sqrt_c2 + eps;             /* 7. */
            param[i] = theta - step_size * m / denom;
        }
    }
}
