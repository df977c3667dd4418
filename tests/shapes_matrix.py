"""The convolution shape matrix of issue #16 (shared by the CPU plan/compile tests and the GPU tests):
C up to 64, M up to 128, K = 1, 3, 5, 7, 11, non-square images. B, C, H, W, M, K."""
MATRIX = {
    "c16_m32_k3_9x9": (3, 16, 9, 9, 32, 3),
    "c8_m16_k1": (2, 8, 12, 10, 16, 1),
    "c64_m64_k3": (2, 64, 12, 14, 64, 3),
    "c64_m128_k3": (1, 64, 10, 9, 128, 3),
    "c32_m48_k5": (2, 32, 17, 13, 48, 5),
    "c12_m24_k7": (2, 12, 21, 16, 24, 7),
    "c3_m20_k11": (2, 3, 24, 19, 20, 11),
    "c64_m8_k11": (1, 64, 14, 13, 8, 11),
    "c64_m8_k11_wide": (1, 64, 40, 36, 8, 11),
    "c1_m128_k5": (2, 1, 15, 40, 128, 5),
    "c6_m4_k1": (3, 6, 5, 11, 4, 1),
    "c64_m4_k7_dyn": (2, 64, 40, 40, 4, 7),      # constant weights, tile in dynamic shared memory
}
# the fast strategies' variants: direct fp32 / fp16, tensor cores, and each with the fused ReLU + pool
FAST = ["fused", "op_5", "op_5_tc", "fused_pool", "tc_fused", "tc_all"]   # tc_all: POOL_CROP + CP_ASYNC
