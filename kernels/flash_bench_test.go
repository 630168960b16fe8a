//go:build linux

package kernels

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/internal/testutil"
)

// BenchmarkFlashAttention times the fused attention against AttentionForward
// (inference, no saved probabilities) on the small model's heads (NH 6, HS
// 64) at long lengths; FLOPs count QKᵀ and PV over all T² pairs.
func BenchmarkFlashAttention(b *testing.B) {
	r := testutil.Rand(65)
	NH, HS := 6, 64
	C := NH * HS
	for _, sh := range [][2]int{{8, 128}, {1, 512}, {1, 1024}, {1, 2048}, {1, 4096}, {1, 16384}} {
		B, T := sh[0], sh[1]
		q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
		out, lse := make([]float32, B*T*C), make([]float32, B*NH*T)
		flop := 4 * float64(B*NH*T*T*HS)
		b.Run(fmt.Sprintf("%dx%d/blocked", B, T), func(b *testing.B) {
			c0 := cpuSeconds()
			for i := 0; i < b.N; i++ {
				AttentionForward(out, nil, q, k, v, nil, false, Dropout{}, B, T, NH, HS)
			}
			cpuGflops(b, flop, c0)
		})
		b.Run(fmt.Sprintf("%dx%d/flash", B, T), func(b *testing.B) {
			b.ReportAllocs()
			c0 := cpuSeconds()
			for i := 0; i < b.N; i++ {
				FlashAttentionForward(out, lse, q, k, v, nil, false, Dropout{}, B, T, NH, HS)
			}
			cpuGflops(b, flop, c0)
		})
		b.Run(fmt.Sprintf("%dx%d/flash_bf16", B, T), func(b *testing.B) {
			if err := blas.BF16Supported(); err != nil {
				b.Skip(err)
			}
			c0 := cpuSeconds()
			for i := 0; i < b.N; i++ {
				FlashAttentionForwardBF16(out, lse, q, k, v, nil, false, Dropout{}, B, T, NH, HS)
			}
			cpuGflops(b, flop, c0)
		})
		b.Run(fmt.Sprintf("%dx%d/flash_causal", B, T), func(b *testing.B) {
			c0 := cpuSeconds()
			for i := 0; i < b.N; i++ {
				FlashAttentionForward(out, lse, q, k, v, nil, true, Dropout{}, B, T, NH, HS)
			}
			cpuGflops(b, flop/2, c0)
		})
		if T > 4096 {
			continue
		}
		dq, dk, dv, dout := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C), testutil.RandN(r, B*T*C, 1)
		b.Run(fmt.Sprintf("%dx%d/flash_backward", B, T), func(b *testing.B) {
			FlashAttentionForward(out, lse, q, k, v, nil, false, Dropout{}, B, T, NH, HS)
			c0 := cpuSeconds()
			for i := 0; i < b.N; i++ {
				FlashAttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, nil, false, Dropout{}, B, T, NH, HS)
			}
			cpuGflops(b, 2*flop, c0)
		})
		b.Run(fmt.Sprintf("%dx%d/flash_backward_bf16", B, T), func(b *testing.B) {
			if err := blas.BF16Supported(); err != nil {
				b.Skip(err)
			}
			FlashAttentionForward(out, lse, q, k, v, nil, false, Dropout{}, B, T, NH, HS)
			c0 := cpuSeconds()
			for i := 0; i < b.N; i++ {
				FlashAttentionBackwardBF16(dq, dk, dv, dout, q, k, v, out, lse, nil, false, Dropout{}, B, T, NH, HS)
			}
			cpuGflops(b, 2*flop, c0)
		})
		b.Run(fmt.Sprintf("%dx%d/backward", B, T), func(b *testing.B) {
			probs := make([]float32, B*NH*T*T)
			AttentionForward(out, probs, q, k, v, nil, false, Dropout{}, B, T, NH, HS)
			c0 := cpuSeconds()
			for i := 0; i < b.N; i++ {
				AttentionBackward(dq, dk, dv, dout, q, k, v, probs, nil, false, Dropout{}, B, T, NH, HS)
			}
			cpuGflops(b, 2*flop, c0)
		})
	}
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return float64(u.Utime.Nano()+u.Stime.Nano()) / 1e9
}

// cpuGflops reports GFLOP/s by wall clock and per CPU-second used since c0
// (the rate per core, less sensitive to other jobs on a shared machine).
func cpuGflops(b *testing.B, flop, c0 float64) {
	gflops(b, flop)
	if c := cpuSeconds() - c0; c > 0 {
		b.ReportMetric(flop*float64(b.N)/c/1e9, "GFLOP/cpu-s")
	}
}

// BenchmarkFlashCrossAttention times the fused cross-attention against
// CrossAttentionForward (inference) for a decoder's Tq queries over Tk
// source keys (NH 4, HS 64: a base seq2seq model's heads); FLOPs count QKᵀ
// and PV over all Tq·Tk pairs.
func BenchmarkFlashCrossAttention(b *testing.B) {
	r := testutil.Rand(67)
	NH, HS := 4, 64
	C := NH * HS
	for _, sh := range [][3]int{{8, 40, 41}, {1, 512, 2048}, {1, 1024, 4096}} {
		B, Tq, Tk := sh[0], sh[1], sh[2]
		q, k, v := testutil.RandN(r, B*Tq*C, 1), testutil.RandN(r, B*Tk*C, 1), testutil.RandN(r, B*Tk*C, 1)
		out := make([]float32, B*Tq*C)
		flop := 4 * float64(B*NH*Tq*Tk*HS)
		b.Run(fmt.Sprintf("%dx%dx%d/cross", B, Tq, Tk), func(b *testing.B) {
			c0 := cpuSeconds()
			for i := 0; i < b.N; i++ {
				CrossAttentionForward(out, nil, q, k, v, nil, B, Tq, Tk, NH, HS)
			}
			cpuGflops(b, flop, c0)
		})
		b.Run(fmt.Sprintf("%dx%dx%d/flash", B, Tq, Tk), func(b *testing.B) {
			c0 := cpuSeconds()
			for i := 0; i < b.N; i++ {
				FlashCrossAttentionForward(out, nil, q, k, v, nil, false, B, Tq, Tk, NH, HS)
			}
			cpuGflops(b, flop, c0)
		})
	}
}
