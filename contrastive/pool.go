package contrastive

// poolEps is the least token count mean pooling divides by
// (sentence-transformers' torch.clamp(sum_mask, min=1e-9)).
const poolEps = 1e-9

// MeanPoolForward writes the mean of each row's hidden states over its
// attention mask: out [B, H] (=), h [B, T, H], mask [B, T] (non-zero for a
// token),
//
//	out[b] = Σ_t m[b,t] h[b,t] / max(Σ_t m[b,t], 1e-9)
//
// summed in float64 in position order (as package sentence's Pooling.Pool
// with mean and include_prompt).
func MeanPoolForward(out, h []float32, mask []int32, B, T, H int) {
	sum := make([]float64, H)
	for b := range B {
		clear(sum)
		n := 0.0
		for t := range T {
			if mask[b*T+t] == 0 {
				continue
			}
			n++
			for j, x := range h[(b*T+t)*H : (b*T+t+1)*H] {
				sum[j] += float64(x)
			}
		}
		n = max(n, poolEps)
		for j, s := range sum {
			out[b*H+j] = float32(s / n)
		}
	}
}

// MeanPoolBackward writes the gradient of MeanPoolForward's input, dh
// [B, T, H] (=; zero at padding), from dout [B, H]:
//
//	dh[b,t] = m[b,t] dout[b] / max(Σ_t m[b,t], 1e-9)
func MeanPoolBackward(dh, dout []float32, mask []int32, B, T, H int) {
	for b := range B {
		n := 0.0
		for t := range T {
			if mask[b*T+t] != 0 {
				n++
			}
		}
		n = max(n, poolEps)
		for t := range T {
			row := dh[(b*T+t)*H : (b*T+t+1)*H]
			if mask[b*T+t] == 0 {
				clear(row)
				continue
			}
			for j := range row {
				row[j] = float32(float64(dout[b*H+j]) / n)
			}
		}
	}
}

// CLSPoolForward writes each row's hidden state at position 0 ([CLS]):
// out [B, H] (=), h [B, T, H].
func CLSPoolForward(out, h []float32, B, T, H int) {
	for b := range B {
		copy(out[b*H:(b+1)*H], h[b*T*H:b*T*H+H])
	}
}

// CLSPoolBackward writes the gradient of CLSPoolForward's input, dh
// [B, T, H] (=): dout [B, H] at position 0, zero elsewhere.
func CLSPoolBackward(dh, dout []float32, B, T, H int) {
	clear(dh[:B*T*H])
	for b := range B {
		copy(dh[b*T*H:b*T*H+H], dout[b*H:(b+1)*H])
	}
}
