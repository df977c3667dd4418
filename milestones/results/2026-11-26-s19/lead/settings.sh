# Session 19 lead: the gemm_trace settings of the device calls (sourced by callN.sh)
G="BF_GELU_FAST=1 BF_RESID_PF=1"
R0="BF_EPI_TMA=1 BF_BN=192 BF_STAGES=4 BF_EPI_TMA_BUFS=3 $G"
R1="$R0 BF_L2_PF_A=8"
R2="$R0 BF_L2_PF_A=16"
R3="BF_EPI_TMA=1 BF_BN=128 BF_STAGES=5 BF_EPI_TMA_BUFS=2 $G BF_L2_PF_A=8"
P0="BF_PP=1 BF_EPI_TMA=1 BF_BN=192 BF_STAGES=4 BF_EPI_TMA_BUFS=4 $G"
P1="$P0 BF_L2_PF_A=8"
P2="$P0 BF_L2_PF_B=8"
P3="$P0 BF_L2_PF_A=8 BF_L2_PF_B=8"
# call 2: the projections' settings without the producer's residual prefetch
R0n="BF_EPI_TMA=1 BF_BN=192 BF_STAGES=4 BF_EPI_TMA_BUFS=3 BF_GELU_FAST=1"
P0n="BF_PP=1 BF_EPI_TMA=1 BF_BN=192 BF_STAGES=4 BF_EPI_TMA_BUFS=4 BF_GELU_FAST=1"
# call 3: ping-pong at BF_BN 128 for the projections (three tiles a block: the epilogues' DRAM traffic spread wider)
PB5="BF_PP=1 BF_EPI_TMA=1 BF_BN=128 BF_STAGES=5 BF_EPI_TMA_BUFS=2 BF_GELU_FAST=1"
PB4="BF_PP=1 BF_EPI_TMA=1 BF_BN=128 BF_STAGES=4 BF_EPI_TMA_BUFS=3 BF_GELU_FAST=1"
# call 5: the LM head's tile order (BF_GROUP: row tiles per group, walked column by column)
L0="BF_PP=1 BF_EPI_TMA=1 BF_BN=192 BF_STAGES=4 BF_EPI_TMA_BUFS=4 BF_GELU_FAST=1"
L64="$L0 BF_GROUP=64"
L32="$L0 BF_GROUP=32"
