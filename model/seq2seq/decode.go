package seq2seq

import (
	"context"
	"fmt"
	"math"

	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/nn"
)

// Encoded is the encoder's output for a set of sources, with every decoder
// layer's cross-attention keys and values computed once.
type Encoded struct {
	B, S int
	Len  []int       // each source's length with its EOS
	Mask []float32   // [B, S] 1 for a real token
	Out  []float32   // [B, S, C] LN_enc(x_L), or x_L in post-LN
	K, V [][]float32 // per decoder layer [B, S, C]
}

// Encode runs the encoder (no dropout) on the sources (EOS is appended).
// It returns ctx's error, checked before the encoder and before each
// decoder layer's cross-attention keys and values (as Forward), when ctx
// ends.
func (m *Model) Encode(ctx context.Context, src [][]int32) (*Encoded, error) {
	b, err := NewBatch(m.Config, src, nil)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := m.Config
	p := &Pass{m: m, b: b, es: dims{b.B, b.S, c.DModel, c.Heads, c.HeadSize()}, rotS: m.rotation(0, b.S)}
	m.encodeForward(p)
	e := &Encoded{B: b.B, S: b.S, Mask: b.SrcMask, Out: p.encLN.out}
	for _, s := range src {
		e.Len = append(e.Len, len(s)+1)
	}
	for l := range m.Dec {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		k, v := m.crossKV(&m.Dec[l], e.Out, b.B*b.S)
		e.K, e.V = append(e.K, k), append(e.V, v)
	}
	return e, nil
}

// State is a decoder's key/value cache: for R rows, each decoder layer's
// self-attention keys (rotated) and values of the tokens fed so far, and the
// source row each decoder row reads through cross-attention (beams of one
// source share its encoder keys and values).
type State struct {
	enc  *Encoded
	rows []int
	n    int         // tokens fed so far
	cap  int         // cache capacity in tokens
	k, v [][]float32 // per layer [R, cap, C]
	// sk and sv are the buffers Reorder copies into and swaps with k and v,
	// so that a beam search's steps reuse two caches instead of allocating one.
	sk, sv [][]float32
}

// NewState starts decoding rows that read the given source rows of enc,
// with room for capacity tokens (it grows when needed).
func (m *Model) NewState(enc *Encoded, rows []int, capacity int) (*State, error) {
	for i, r := range rows {
		if r < 0 || r >= enc.B {
			return nil, fmt.Errorf("seq2seq: decoder row %d reads source row %d of %d", i, r, enc.B)
		}
	}
	st := &State{enc: enc, rows: append([]int(nil), rows...)}
	st.grow(m, max(capacity, 1))
	return st, nil
}

// Len is the number of tokens fed so far.
func (st *State) Len() int { return st.n }

func (st *State) grow(m *Model, capacity int) {
	C, R := m.Config.DModel, len(st.rows)
	k, v := make([][]float32, len(m.Dec)), make([][]float32, len(m.Dec))
	for l := range m.Dec {
		k[l], v[l] = make([]float32, R*capacity*C), make([]float32, R*capacity*C)
		for i := 0; i < R && st.k != nil; i++ {
			copy(k[l][i*capacity*C:], st.k[l][i*st.cap*C:(i*st.cap+st.n)*C])
			copy(v[l][i*capacity*C:], st.v[l][i*st.cap*C:(i*st.cap+st.n)*C])
		}
	}
	st.k, st.v, st.cap = k, v, capacity
	st.sk, st.sv = nil, nil
}

// Reorder makes row i a copy of old row idx[i] (beam search's selection).
func (st *State) Reorder(idx []int) {
	R, C := len(idx), len(st.k[0])/(len(st.rows)*st.cap)
	rows := make([]int, R)
	for i, j := range idx {
		rows[i] = st.rows[j]
	}
	if st.sk == nil {
		st.sk, st.sv = make([][]float32, len(st.k)), make([][]float32, len(st.k))
	}
	for l := range st.k {
		k, v := resize(st.sk[l], R*st.cap*C), resize(st.sv[l], R*st.cap*C)
		for i, j := range idx {
			copy(k[i*st.cap*C:(i*st.cap+st.n)*C], st.k[l][j*st.cap*C:(j*st.cap+st.n)*C])
			copy(v[i*st.cap*C:(i*st.cap+st.n)*C], st.v[l][j*st.cap*C:(j*st.cap+st.n)*C])
		}
		st.sk[l], st.sv[l], st.k[l], st.v[l] = st.k[l], st.v[l], k, v
	}
	st.rows = rows
}

// resize returns b with length n, reusing its array when it is large enough.
// Positions past the tokens fed are never read before Step writes them, so
// what a reused array holds there does not matter.
func resize(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// Step feeds one token per row at position st.Len() and returns the next
// token's logits [R, V]: the decoder of Forward for that position, with the
// earlier positions read from the cache.
func (m *Model) Step(st *State, tokens []int32) ([]float32, error) {
	if len(tokens) != len(st.rows) {
		return nil, fmt.Errorf("seq2seq: %d tokens for %d decoder rows", len(tokens), len(st.rows))
	}
	return m.feed(st, tokens, 1)
}

// feed feeds L tokens per row (tokens [R, L]) at positions st.Len() …
// st.Len()+L−1 and returns the logits [R, V] after the last: the decoder
// of Forward for those positions, the earlier ones read from the cache.
// Its attention is the fused kernel's (kernels.FlashCrossAttentionForward):
// the L new queries of a row over its cached and new keys under the causal
// mask aligned to the last key, and over its source's keys.
func (m *Model) feed(st *State, tokens []int32, L int) ([]float32, error) {
	c := m.Config
	R, C, NH, HS, S := len(st.rows), c.DModel, c.Heads, c.HeadSize(), st.enc.S
	if L < 1 || len(tokens) != R*L {
		return nil, fmt.Errorf("seq2seq: %d tokens for %d decoder rows of %d", len(tokens), R, L)
	}
	if err := checkIDs(c, "decoder input", 0, tokens); err != nil {
		return nil, err
	}
	if st.n+L > st.cap {
		st.grow(m, max(2*st.cap, st.n+L))
	}
	t, eps, RL := st.n, float32(c.LayerNormEps), R*L
	// x = √C·E[token] (+ PE(t … t+L−1))
	x := make([]float32, RL*C)
	kernels.EmbeddingForward(x, tokens, nil, m.Embed.Data, nil, RL, C)
	sc := float32(math.Sqrt(float64(C)))
	var pe []float32
	if m.rot == nil {
		pe = make([]float32, L*C)
		sinusoid(pe, t, L, C)
	}
	for i := range x {
		x[i] *= sc
		if pe != nil {
			x[i] += pe[i%(L*C)]
		}
	}
	rot := m.rotation(t, L)
	ln, att, o := make([]float32, RL*C), make([]float32, RL*C), make([]float32, RL*C)
	qkv, q, k, v := make([]float32, RL*3*C), make([]float32, RL*C), make([]float32, RL*C), make([]float32, RL*C)
	h := make([]float32, RL*c.FFN)
	post := c.postLN()
	// in is a sub-layer's input: LN(x) in pre-LN (in ln), x in post-LN.
	in := func(norm *nn.LayerNorm) []float32 {
		if post {
			return x
		}
		norm.Forward(ln, nil, nil, x, eps, RL, C)
		return ln
	}
	// residual is x += o in pre-LN, x = LN(x + o) in post-LN.
	residual := func(norm *nn.LayerNorm) {
		kernels.AddForward(x, x, o, RL*C)
		if post {
			norm.Forward(ln, nil, nil, x, eps, RL, C)
			copy(x, ln)
		}
	}
	for l := range m.Dec {
		L0 := &m.Dec[l]
		// Self-attention over the cache and these tokens.
		L0.QKV.Forward(qkv, in(&L0.SelfNorm), RL)
		kernels.SplitQKV(q, k, v, qkv, RL, C)
		if rot != nil {
			m.rot.Forward(q, rot.sin, rot.cos, R, L, NH)
			m.rot.Forward(k, rot.sin, rot.cos, R, L, NH)
		}
		for i := 0; i < R; i++ {
			ck, cv := st.k[l][i*st.cap*C:], st.v[l][i*st.cap*C:]
			copy(ck[t*C:(t+L)*C], k[i*L*C:(i+1)*L*C])
			copy(cv[t*C:(t+L)*C], v[i*L*C:(i+1)*L*C])
			kernels.FlashCrossAttentionForward(att[i*L*C:(i+1)*L*C], nil, q[i*L*C:(i+1)*L*C], ck[:(t+L)*C], cv[:(t+L)*C], nil, true, 1, L, t+L, NH, HS)
		}
		L0.SelfOut.Forward(o, att, RL)
		residual(&L0.SelfNorm)
		// Cross-attention over the row's source.
		L0.Q.Forward(q, in(&L0.CrossNorm), RL)
		for i, r := range st.rows {
			kernels.FlashCrossAttentionForward(att[i*L*C:(i+1)*L*C], nil, q[i*L*C:(i+1)*L*C], st.enc.K[l][r*S*C:(r+1)*S*C], st.enc.V[l][r*S*C:(r+1)*S*C], st.enc.Mask[r*S:(r+1)*S], false, 1, L, S, NH, HS)
		}
		L0.CrossOut.Forward(o, att, RL)
		residual(&L0.CrossNorm)
		// Feed-forward.
		L0.FC1.Forward(h, in(&L0.FFNNorm), RL)
		kernels.ActivationForward(h, h, m.act, RL*c.FFN)
		L0.FC2.Forward(o, h, RL)
		residual(&L0.FFNNorm)
	}
	st.n += L
	// logits of each row's last position only
	last := x
	if L > 1 {
		last = make([]float32, R*C)
		for i := 0; i < R; i++ {
			copy(last[i*C:(i+1)*C], x[((i+1)*L-1)*C:(i+1)*L*C])
		}
	}
	y := last // post-LN: the last sub-layer's LayerNorm is the top
	if !post {
		y = ln[:R*C]
		m.DecNorm.Forward(y, nil, nil, last, eps, R, C)
	}
	logits := make([]float32, R*c.VocabSize)
	kernels.MatmulForward(logits, y, m.Embed.Data, nil, R, C, c.VocabSize)
	return logits, nil
}

// Decoder is the model's side of generation (a generate.Decoder): the
// decoder of Step over a key/value cache, for rows that each read one
// source of an Encoded through cross-attention. Pass it to
// generate.Generate with prompts of the BOS alone (as Translate does).
type Decoder struct {
	m    *Model
	enc  *Encoded
	rows []int
	st   *State
}

// NewDecoder returns the Decoder of rows that read the given source rows
// of enc (Prefill's prompts, one per row).
func (m *Model) NewDecoder(enc *Encoded, rows []int) *Decoder {
	return &Decoder{m: m, enc: enc, rows: append([]int(nil), rows...)}
}

// VocabSize is the target vocabulary V.
func (d *Decoder) VocabSize() int { return d.m.Config.VocabSize }

// PadID is the config's pad id, fed to finished rows.
func (d *Decoder) PadID() int32 { return int32(d.m.Config.PadID) }

// Prefill starts a new cache and feeds the prompts ([R][L], equal lengths,
// R the decoder's rows; usually the BOS alone) in one pass (the causal
// self-attention over the whole prompt, as Forward's), returning the logits
// after the last, [R, V]. Sizes whose cache (R ×
// room.Beams rows of L + room.NewTokens tokens, keys and values of every
// layer, twice while reordering) overflows int64 bytes are an error before
// anything is allocated.
func (d *Decoder) Prefill(ctx context.Context, prompts [][]int32, room generate.Room) ([]float32, error) {
	if len(prompts) != len(d.rows) || len(prompts) == 0 {
		return nil, fmt.Errorf("seq2seq: %d prompts for %d decoder rows", len(prompts), len(d.rows))
	}
	L := len(prompts[0])
	for i, p := range prompts {
		if len(p) != L || L == 0 {
			return nil, fmt.Errorf("seq2seq: prompt %d has %d tokens, prompt 0 has %d: decoder prompts must have equal, positive lengths", i, len(p), L)
		}
	}
	n := int64(1)
	for _, f := range []int64{int64(len(prompts)), int64(room.Beams), int64(L) + int64(room.NewTokens), int64(d.m.Config.DModel), int64(len(d.m.Dec)), 16} {
		if f < 0 || (f != 0 && n > math.MaxInt64/f) {
			return nil, fmt.Errorf("seq2seq: the cache of %d rows × %d beams × (%d + %d) tokens overflows int64", len(prompts), room.Beams, L, room.NewTokens)
		}
		n *= f
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := d.m.NewState(d.enc, d.rows, max(32, L)) // grows when needed
	if err != nil {
		return nil, err
	}
	d.st = st
	tok := make([]int32, 0, len(prompts)*L)
	for _, p := range prompts {
		tok = append(tok, p...)
	}
	return d.m.feed(st, tok, L)
}

// Step checks ctx and feeds one token per row (Model.Step).
func (d *Decoder) Step(ctx context.Context, tokens []int32) ([]float32, error) {
	if d.st == nil {
		return nil, fmt.Errorf("seq2seq: Step before Prefill")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return d.m.Step(d.st, tokens)
}

// Reorder makes row i a copy of the former row idx[i] (State.Reorder).
func (d *Decoder) Reorder(idx []int) { d.st.Reorder(idx) }

// DecodeOptions configure Translate.
type DecodeOptions struct {
	// Beam is the beam width; 1 or less decodes greedily. Vaswani et al.: 4.
	Beam int
	// Alpha is the length penalty's exponent: a finished hypothesis Y scores
	// log P(Y)/((5+|Y|)/6)^α (Wu et al. 2016, GNMT), |Y| counting its EOS.
	// Vaswani et al.: 0.6.
	Alpha float64
	// MaxExtra bounds the output at the source's length + MaxExtra tokens
	// (EOS included). Vaswani et al.: 50.
	MaxExtra int
}

// DefaultDecode is Vaswani et al.'s beam search: beam 4, α 0.6, source
// length + 50.
var DefaultDecode = DecodeOptions{Beam: 4, Alpha: 0.6, MaxExtra: 50}

// Translate decodes every source (ids without EOS) and returns the output
// ids without BOS and EOS, through generate.Generate: greedy for Beam ≤ 1,
// batched over the sources, else beam search one source at a time
// (fairseq's sequence generator: generate's beam search with GNMT's length
// penalty, stopping once Beam hypotheses are finished). Each output holds
// at most its source's length + MaxExtra tokens, EOS included. ctx is
// checked by Encode and between steps.
func (m *Model) Translate(ctx context.Context, src [][]int32, o DecodeOptions) ([][]int32, error) {
	if o.MaxExtra < 1 {
		return nil, fmt.Errorf("seq2seq: MaxExtra %d must be at least 1", o.MaxExtra)
	}
	out := make([][]int32, len(src))
	const chunk = 64
	for lo := 0; lo < len(src); lo += chunk {
		hi := min(lo+chunk, len(src))
		enc, err := m.Encode(ctx, src[lo:hi])
		if err != nil {
			return nil, err
		}
		if o.Beam <= 1 {
			got, err := m.greedy(ctx, enc, o.MaxExtra)
			if err != nil {
				return nil, err
			}
			copy(out[lo:], got)
			continue
		}
		for r := 0; r < enc.B; r++ {
			if out[lo+r], err = m.beamSearch(ctx, enc, r, o); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// bos is R decoder prompts of the BOS alone.
func (m *Model) bos(R int) [][]int32 {
	p := make([][]int32, R)
	for i := range p {
		p[i] = []int32{int32(m.Config.BOSID)}
	}
	return p
}

// output cuts a decoded sequence (BOS, then new ids) to the new ids
// before the EOS, at most limit of them.
func (m *Model) output(seq []int32, limit int) []int32 {
	ids := seq[1:]
	for i, id := range ids {
		if id == int32(m.Config.EOSID) {
			ids = ids[:i]
			break
		}
	}
	return ids[:min(len(ids), limit)]
}

// greedy decodes every row of enc by taking the most probable token (the
// lowest id among ties) until EOS or the row's length limit (its source's
// length + maxExtra tokens, EOS included).
func (m *Model) greedy(ctx context.Context, enc *Encoded, maxExtra int) ([][]int32, error) {
	R := enc.B
	rows, limits := make([]int, R), make([]int, R)
	longest := 0
	for i := range rows {
		rows[i], limits[i] = i, enc.Len[i]-1+maxExtra
		longest = max(longest, limits[i])
	}
	gen, err := generate.Generate(ctx, m.NewDecoder(enc, rows), m.bos(R), generate.Options{
		MaxNewTokens: longest, EOS: m.Config.EOSID,
		Stop: func(r int, ids []int32) bool { return len(ids) >= limits[r] },
	})
	if err != nil {
		return nil, err
	}
	out := make([][]int32, R)
	for i, seq := range gen.Sequences {
		out[i] = m.output(seq, limits[i])
	}
	return out, nil
}

// beamSearch decodes source row r of enc with o.Beam beams, following
// fairseq's sequence generator: each step scores every continuation of the
// k live hypotheses, keeps the 2k best, finishes those that end in EOS when
// they are among the k best candidates (scored log P/lp(|Y|), GNMT's
// penalty), carries the k best others on, and stops when k hypotheses are
// finished or at the length limit (where the live ones are finished as they
// stand). With k = 1 this is greedy decoding exactly.
func (m *Model) beamSearch(ctx context.Context, enc *Encoded, r int, o DecodeOptions) ([]int32, error) {
	limit := enc.Len[r] - 1 + o.MaxExtra
	gen, err := generate.Generate(ctx, m.NewDecoder(enc, []int{r}), m.bos(1), generate.Options{
		MaxNewTokens: limit, EOS: m.Config.EOSID, Strategy: generate.Beam, NumBeams: o.Beam,
		LengthPenalty: o.Alpha, Length: generate.LengthGNMT, EarlyStopping: generate.EarlyStopOnBeams,
	})
	if err != nil {
		return nil, err
	}
	return m.output(gen.Sequences[0], limit), nil
}
