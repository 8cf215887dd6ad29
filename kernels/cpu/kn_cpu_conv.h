/* kn_cpu_conv.h - fast 2-D convolutions on the packed SGEMM (kn_cpu_gemm.h)
 * and a direct vectorised depthwise convolution, with TensorFlow semantics
 * (HWIO filters, NHWC/NCHW, SAME/VALID/EXPLICIT padding, strides, dilations).
 *
 * On AVX-512 and AVX2, NHWC convolutions with a constant (pre-packed) filter run the
 * direct kernel of kn_cpu_dconv.c instead, and (AVX-512) 3x3 stride-1 ones with 32+
 * channels Winograd F(2x2, 3x3) (kn__wino_*).
 *
 * NHWC: C[pixels, OC] = im2col(x)[pixels, KH*KW*C] * f[KH*KW*C, OC]; the
 * input side is packed straight from x (implicit im2col), the filter is the
 * B operand (pre-packed when constant). NCHW, per image: C[OC, OH*OW] =
 * f'[OC, C*KH*KW] * im2col(x)[C*KH*KW, OH*OW], so the output lands in NCHW
 * order and the filter is the A operand.
 *
 * Internal to kernels/cpu.
 */
#ifndef KN_CPU_CONV_H
#define KN_CPU_CONV_H

#include "kn_backend.h"
#include "kn_cpu_gemm.h"
#include "kn_cpu_util.h"

typedef struct kn_conv_attrs {
    int nchw, padding;
    int64_t sh, sw, dh, dw;
    int64_t ep[4]; /* EXPLICIT: top, bottom, left, right */
} kn_conv_attrs;

typedef struct kn_conv_geo {
    int64_t N, H, W, C; /* input */
    int64_t KH, KW;     /* filter window */
    int64_t OH, OW, OC; /* output */
    int64_t pt, pl;     /* leading pads */
} kn_conv_geo;

/* data_format, strides, dilations, padding, explicit_paddings. MS_EINVAL
 * naming the node. */
ms_status kn__conv_parse(const kn_node *n, kn_conv_attrs *a);

/* Fills g from the input (rank 4 in a's layout) and an HWIO filter
 * [KH, KW, C, OC] (depthwise: [KH, KW, C, mult], OC = C * mult). */
ms_status kn__conv_geo(const kn_node *n, const kn_conv_attrs *a, const rt_tensor *x,
                       const rt_tensor *f, int depthwise, kn_conv_geo *g);

/* Output shape in a's layout. */
rt_shape kn__conv_oshape(const kn_conv_attrs *a, const kn_conv_geo *g);

/* Packs an HWIO filter [KH, KW, C, OC] as the GEMM operand the layout needs. */
ms_status kn__conv_pack_filter(int nchw, const rt_tensor *f, kn_gemm_packed *out);

/* y = epi(conv(x, f)), layout of a. f is the raw HWIO filter; pk, when not
 * NULL, its packed form for the same layout. */
ms_status kn__conv_run(kn_ctx *ctx, const kn_conv_attrs *a, const kn_conv_geo *g, const float *x,
                       const float *f, const kn_gemm_packed *pk, float *y, const kn_gemm_epi *epi);

/* Direct NHWC convolution (kn_cpu_dconv.c): non-zero when it can run this
 * convolution, i.e. NHWC, AVX-512 and pk the filter packed for it. */
int kn__dconv_ok(const kn_conv_attrs *a, const kn_conv_geo *g, const kn_gemm_packed *pk);
/* y = epi(conv(x, pk)) reading x in place. MS_ENOMEM. */
ms_status kn__dconv_run(kn_ctx *ctx, const kn_conv_attrs *a, const kn_conv_geo *g, const float *x,
                        const kn_gemm_packed *pk, float *y, const kn_gemm_epi *epi);

/* Winograd F(2x2, 3x3) for 3x3 stride-1 undilated NHWC convolutions
 * (kn_cpu_dconv.c): the filter transformed once at load. */
typedef struct kn_wino {
    int64_t C, OC;
    float *u; /* owned: [16][OC / 32 panels][C][32] */
} kn_wino;
/* Transforms a 3x3 HWIO float filter. MS_EINVAL, MS_ENOMEM. */
ms_status kn__wino_pack(const rt_tensor *f, kn_wino *out);
void kn__wino_free(kn_wino *w);
/* Non-zero when kn__wino_run can compute this convolution with w. */
int kn__wino_ok(const kn_conv_attrs *a, const kn_conv_geo *g, const kn_wino *w);
ms_status kn__wino_run(kn_ctx *ctx, const kn_conv_geo *g, const float *x, const kn_wino *w,
                       float *y, const kn_gemm_epi *epi);

/* Conv2DBackpropInput whose forward stride equals its window, unpadded
 * (a 2x2/2 transposed convolution), NHWC, AVX-512 (kn_cpu_dconv.c). The
 * filter [KH, KW, C, OC] is repacked once at load. */
typedef struct kn_deconv {
    int64_t KH, KW, C, OC;
    float *u; /* owned: [KH * KW][C / 32 panels][OC][32] */
} kn_deconv;
ms_status kn__deconv_pack(const rt_tensor *f, kn_deconv *out);
void kn__deconv_free(kn_deconv *d);
/* dx [N, OH*KH, OW*KW, C] from dy [N, OH, OW, OC]; every element written. */
void kn__deconv_run(kn_ctx *ctx, const kn_deconv *d, int64_t N, int64_t OH, int64_t OW,
                    const float *dy, float *dx);

/* Depthwise windows up to this many taps (KH * KW) run in the fast kernel. */
#define KN_DW_MAX_TAPS 256

/* Depthwise: y = epi(depthwise(x, f)), f [KH, KW, C, mult]. NCHW goes
 * through NHWC scratch. MS_ENOMEM. */
ms_status kn__dwconv_run(kn_ctx *ctx, const kn_conv_attrs *a, const kn_conv_geo *g, const float *x,
                         const float *f, float *y, const kn_gemm_epi *epi);

#endif /* KN_CPU_CONV_H */
