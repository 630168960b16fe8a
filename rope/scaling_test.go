package rope

import (
	"math"
	"strings"
	"testing"
)

// refFrequencies is a second, plain float64 transcription of the rope_scaling
// formulas (HF transformers modeling_rope_utils.py), written from the
// formulas rather than from scaling.go: powers through exp/log, the YaRN
// blend as θ_i·(γ_i/factor + 1 − γ_i), the Llama-3 bands by wavelength.
func refFrequencies(t *testing.T, s Scaling, theta float64, d, maxPos, L int) ([]float64, float64) {
	t.Helper()
	theta0 := func(base float64, i int) float64 { return math.Exp(-float64(2*i) / float64(d) * math.Log(base)) }
	out := make([]float64, d/2)
	orig := s.OriginalMaxPositions
	if orig == 0 {
		orig = maxPos
	}
	att := 1.0
	switch s.Type {
	case "", "default":
		for i := range out {
			out[i] = theta0(theta, i)
		}
	case "linear":
		for i := range out {
			out[i] = theta0(theta, i) / s.Factor
		}
	case "dynamic":
		base := theta
		if L > maxPos {
			ratio := s.Factor*float64(L)/float64(maxPos) - s.Factor + 1
			base = theta * math.Exp(float64(d)/float64(d-2)*math.Log(ratio))
		}
		for i := range out {
			out[i] = theta0(base, i)
		}
	case "yarn":
		bf, bs := s.BetaFast, s.BetaSlow
		if bf == 0 {
			bf = 32
		}
		if bs == 0 {
			bs = 1
		}
		cd := func(rot float64) float64 {
			return float64(d) * math.Log(float64(orig)/(2*math.Pi*rot)) / (2 * math.Log(theta))
		}
		lo := math.Max(0, math.Floor(cd(bf)))
		hi := math.Min(float64(d-1), math.Ceil(cd(bs)))
		if lo == hi {
			hi += 0.001
		}
		for i := range out {
			g := (float64(i) - lo) / (hi - lo) // 0: keep θ_i, 1: θ_i/factor
			g = math.Max(0, math.Min(1, g))
			out[i] = theta0(theta, i) * (g/s.Factor + 1 - g)
		}
		att = s.AttentionFactor
		if att == 0 {
			att = 1 + 0.1*math.Log(s.Factor)
		}
	case "longrope":
		f := s.Factor
		if s.OriginalMaxPositions > 0 {
			f = float64(maxPos) / float64(s.OriginalMaxPositions)
		}
		ext := s.ShortFactor
		if L > orig {
			ext = s.LongFactor
		}
		for i := range out {
			out[i] = theta0(theta, i) / ext[i]
		}
		att = s.AttentionFactor
		if att == 0 {
			att = 1
			if f > 1 {
				att = math.Sqrt(1 + math.Log(f)/math.Log(float64(orig)))
			}
		}
	case "llama3":
		for i := range out {
			th := theta0(theta, i)
			wl := 2 * math.Pi / th
			switch {
			case wl < float64(orig)/s.HighFreqFactor:
				out[i] = th
			case wl > float64(orig)/s.LowFreqFactor:
				out[i] = th / s.Factor
			default:
				a := (float64(orig)/wl - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
				out[i] = a*th + (1-a)*th/s.Factor
			}
		}
	default:
		t.Fatalf("reference: unknown type %q", s.Type)
	}
	return out, att
}

func relErr(got, want float64) float64 {
	if got == want {
		return 0
	}
	return math.Abs(got-want) / math.Max(math.Abs(want), 1e-300)
}

func checkFreqs(t *testing.T, name string, got []float64, gotAtt float64, want []float64, wantAtt, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frequencies, want %d", name, len(got), len(want))
	}
	for i := range want {
		if e := relErr(got[i], want[i]); e > tol || math.IsNaN(got[i]) {
			t.Errorf("%s: inv_freq[%d] = %.17g, want %.17g (rel err %.2g)", name, i, got[i], want[i], e)
		}
	}
	if e := relErr(gotAtt, wantAtt); e > tol {
		t.Errorf("%s: attention factor = %.17g, want %.17g (rel err %.2g)", name, gotAtt, wantAtt, e)
	}
}

func seq(lo, hi float64, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = lo + (hi-lo)*float64(i)/float64(max(n-1, 1))
	}
	return v
}

// Every rope_type, rope_theta ≠ 10000, partial widths, dynamic below, at and
// above the original length, LongRoPE short and long: Frequencies equals the
// reference to 1e-6 relative.
func TestFrequenciesMatchReference(t *testing.T) {
	type tc struct {
		name   string
		s      Scaling
		theta  float64
		d, max int
		lens   []int
	}
	cases := []tc{
		{"default", Scaling{}, 10000, 64, 512, []int{1, 512, 4096}},
		{"default theta 5e5", Scaling{Type: "default"}, 500000, 128, 8192, []int{100}},
		{"linear 4", Scaling{Type: "linear", Factor: 4}, 10000, 64, 512, []int{10, 2048}},
		{"linear 2.5 theta 1e6 d24", Scaling{Type: "linear", Factor: 2.5}, 1e6, 24, 128, []int{1}},
		{"dynamic 2", Scaling{Type: "dynamic", Factor: 2}, 10000, 64, 512, []int{1, 511, 512, 513, 1024, 5000}},
		{"dynamic 8 theta 5e5 d12", Scaling{Type: "dynamic", Factor: 8}, 500000, 12, 128, []int{64, 128, 129, 1 << 14}},
		{"yarn 4", Scaling{Type: "yarn", Factor: 4}, 10000, 64, 2048, []int{1, 8192}},
		{"yarn 16 orig 4096 theta 1e6", Scaling{Type: "yarn", Factor: 16, OriginalMaxPositions: 4096}, 1e6, 128, 65536, []int{100}},
		{"yarn betas attn", Scaling{Type: "yarn", Factor: 8, BetaFast: 16, BetaSlow: 2, AttentionFactor: 0.7}, 10000, 32, 256, []int{1}},
		{"yarn 40 d16 theta 5e5", Scaling{Type: "yarn", Factor: 40, OriginalMaxPositions: 4096}, 500000, 16, 163840, []int{1}},
		{"yarn tiny original", Scaling{Type: "yarn", Factor: 2}, 10000, 8, 16, []int{1}}, // correction range clamped at 0
		{"llama3", Scaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192}, 500000, 128, 131072, []int{1, 200000}},
		{"llama3 small", Scaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 1024}, 10000, 16, 8192, []int{1}},
	}
	lr := func(name string, d int, s Scaling, max int, lens []int) tc {
		s.Type = "longrope"
		s.ShortFactor, s.LongFactor = seq(1, 3, d/2), seq(1, 40, d/2)
		return tc{name, s, 10000, d, max, lens}
	}
	cases = append(cases,
		// Phi-3 style: the original length beside max_position_embeddings.
		lr("longrope phi3", 96, Scaling{OriginalMaxPositions: 4096}, 131072, []int{1, 4095, 4096, 4097, 131072}),
		// factor given, no original length: the original is max_position_embeddings.
		lr("longrope factor", 32, Scaling{Factor: 16}, 2048, []int{2048, 2049}),
		lr("longrope attn", 32, Scaling{Factor: 16, AttentionFactor: 1.3}, 2048, []int{10, 4000}),
	)
	for _, c := range cases {
		if err := c.s.Validate(c.d); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, L := range c.lens {
			got, att := c.s.Frequencies(c.theta, c.d, c.max, L)
			want, wantAtt := refFrequencies(t, c.s, c.theta, c.d, c.max, L)
			checkFreqs(t, c.name, got, att, want, wantAtt, 1e-6)
		}
	}
}

// The dynamic base is unchanged at and below max_position_embeddings and
// grows above it; LongRoPE switches factors exactly past the original
// length.
func TestLengthDependence(t *testing.T) {
	def, _ := Scaling{}.Frequencies(10000, 32, 256, 1)
	dyn := Scaling{Type: "dynamic", Factor: 4}
	for _, L := range []int{1, 255, 256} {
		got, _ := dyn.Frequencies(10000, 32, 256, L)
		for i := range def {
			if got[i] != def[i] {
				t.Fatalf("dynamic at L=%d: inv_freq[%d] = %v, want unscaled %v", L, i, got[i], def[i])
			}
		}
	}
	got, _ := dyn.Frequencies(10000, 32, 256, 257)
	if got[0] != def[0] || !(got[len(got)-1] < def[len(def)-1]) {
		t.Errorf("dynamic at L=257: want θ_0 kept and the lowest frequency lowered, got %v vs %v", got, def)
	}
	lr := Scaling{Type: "longrope", OriginalMaxPositions: 64, ShortFactor: seq(1, 2, 16), LongFactor: seq(3, 4, 16)}
	short, _ := lr.Frequencies(10000, 32, 256, 64)
	long, _ := lr.Frequencies(10000, 32, 256, 65)
	if relErr(short[1], def[1]/lr.ShortFactor[1]) > 1e-15 || relErr(long[1], def[1]/lr.LongFactor[1]) > 1e-15 {
		t.Errorf("longrope: short %v long %v", short[1], long[1])
	}
	for _, c := range []struct {
		s    Scaling
		want bool
	}{{Scaling{}, false}, {Scaling{Type: "linear"}, false}, {Scaling{Type: "yarn"}, false}, {Scaling{Type: "llama3"}, false}, {Scaling{Type: "dynamic"}, true}, {Scaling{Type: "longrope"}, true}} {
		if c.s.DependsOnLength() != c.want {
			t.Errorf("%q.DependsOnLength() = %v", c.s.Type, !c.want)
		}
	}
}

// Llama 3's rule with all three wavelength bands present: kept, mixed, divided.
func TestLlama3Bands(t *testing.T) {
	s := Scaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192}
	def, _ := Scaling{}.Frequencies(500000, 128, 131072, 1)
	got, _ := s.Frequencies(500000, 128, 131072, 1)
	var kept, mixed, divided int
	for i := range def {
		switch r := def[i] / got[i]; {
		case r == 1:
			kept++
		case relErr(r, 8) < 1e-12:
			divided++
		case r > 1 && r < 8:
			mixed++
		default:
			t.Errorf("pair %d: ratio %v outside [1, 8]", i, r)
		}
	}
	if kept == 0 || mixed == 0 || divided == 0 {
		t.Errorf("bands kept/mixed/divided = %d/%d/%d, want all three present", kept, mixed, divided)
	}
}

// YaRN with factor 1 is no scaling: the same frequencies, attention factor 1.
func TestYarnFactorOneIsDefault(t *testing.T) {
	for _, d := range []int{8, 64, 128} {
		def, _ := Scaling{}.Frequencies(10000, d, 2048, 1)
		got, att := Scaling{Type: "yarn", Factor: 1}.Frequencies(10000, d, 2048, 1)
		checkFreqs(t, "yarn factor 1", got, att, def, 1, 1e-15)
	}
}

// Linear scaling by s turns position p by the angle the unscaled rotation
// gives p/s: the tables, and a rotated query·key score at (m, n), equal the
// unscaled ones at (m/s, n/s) computed in float64.
func TestLinearIsPositionsDividedByS(t *testing.T) {
	const d, s = 16, 4.0
	lin, att := Scaling{Type: "linear", Factor: s}.Frequencies(10000, d, 512, 1)
	def, _ := Scaling{}.Frequencies(10000, d, 512, 1)
	pos := []int{0, 1, 3, 7, 100, 511, 2047}
	sin, cos := make([]float32, len(pos)*d/2), make([]float32, len(pos)*d/2)
	SinCosFrom(sin, cos, pos, lin, att)
	for n, p := range pos {
		for i := range lin {
			a := float64(p) / s * def[i]
			if e := relErr(float64(p)*lin[i], a); e > 1e-12 {
				t.Errorf("angle p=%d i=%d: rel err %v", p, i, e)
			}
			if math.Abs(float64(cos[n*d/2+i])-math.Cos(a)) > 1e-7 || math.Abs(float64(sin[n*d/2+i])-math.Sin(a)) > 1e-7 {
				t.Errorf("p=%d i=%d: cos,sin = %v,%v, want %v,%v", p, i, cos[n*d/2+i], sin[n*d/2+i], math.Cos(a), math.Sin(a))
			}
		}
	}
	// Scores: q at m, k at n, rotated with the scaled tables through Forward.
	r := mustNew(t, Config{HeadSize: d, Layout: Halves})
	q, k := make([]float32, d), make([]float32, d)
	for i := range q {
		q[i], k[i] = float32(math.Sin(float64(i)+1)), float32(math.Cos(3*float64(i)))
	}
	for _, mn := range [][2]int{{0, 0}, {5, 2}, {2047, 3}, {100, 900}} {
		x := append(append([]float32{}, q...), k...) // two tokens
		ps := []int{mn[0], mn[1]}
		sn, cs := make([]float32, d), make([]float32, d)
		SinCosFrom(sn, cs, ps, lin, 1)
		r.Forward(x, sn, cs, 1, 2, 1)
		got := 0.0
		for i := 0; i < d; i++ {
			got += float64(x[i]) * float64(x[d+i])
		}
		// float64 reference at (m/s, n/s): Σ_i (q_a k_a + q_b k_b) cos((n−m)/s·θ_i) + (q_b k_a − q_a k_b) sin(…).
		want := 0.0
		for i := 0; i < d/2; i++ {
			qa, qb, ka, kb := float64(q[i]), float64(q[i+d/2]), float64(k[i]), float64(k[i+d/2])
			phi := (float64(mn[1]) - float64(mn[0])) / s * def[i]
			want += (qa*ka+qb*kb)*math.Cos(phi) + (qb*ka-qa*kb)*math.Sin(phi)
		}
		if math.Abs(got-want) > 1e-5 {
			t.Errorf("score at (%d,%d): %v, want %v (unscaled at (m/s, n/s))", mn[0], mn[1], got, want)
		}
	}
}

// Bad input: errors name the key and the value.
func TestValidateErrors(t *testing.T) {
	lf := seq(1, 2, 8)
	cases := []struct {
		s    Scaling
		dim  int
		want []string
	}{
		{Scaling{Type: "ntk-by-parts"}, 16, []string{"rope_type", `"ntk-by-parts"`, "unknown"}},
		{Scaling{Type: "linear"}, 16, []string{"missing", "factor", `"linear"`}},
		{Scaling{Type: "dynamic"}, 16, []string{"missing", "factor"}},
		{Scaling{Type: "yarn"}, 16, []string{"missing", "factor"}},
		{Scaling{Type: "llama3", LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192}, 16, []string{"missing", "factor"}},
		{Scaling{Type: "linear", Factor: 0.5}, 16, []string{"factor = 0.5", "≥ 1"}},
		{Scaling{Type: "yarn", Factor: 0.5}, 16, []string{"factor = 0.5"}},
		{Scaling{Type: "dynamic", Factor: math.NaN()}, 16, []string{"factor = NaN"}},
		{Scaling{Type: "longrope", ShortFactor: lf, LongFactor: lf, Factor: 0.5}, 16, []string{"factor = 0.5"}},
		{Scaling{Type: "longrope", ShortFactor: lf, LongFactor: lf}, 16, []string{"missing", "factor"}},
		{Scaling{Type: "longrope", LongFactor: lf, Factor: 2}, 16, []string{"missing", "short_factor"}},
		{Scaling{Type: "longrope", ShortFactor: lf, Factor: 2}, 16, []string{"missing", "long_factor"}},
		{Scaling{Type: "longrope", ShortFactor: lf, LongFactor: seq(1, 2, 7), Factor: 2}, 16, []string{"long_factor", "7 numbers", "8"}},
		{Scaling{Type: "longrope", ShortFactor: lf, LongFactor: lf, Factor: 2}, 32, []string{"short_factor", "8 numbers", "16"}},
		{Scaling{Type: "longrope", ShortFactor: []float64{1, 1, 0, 1, 1, 1, 1, 1}, LongFactor: lf, Factor: 2}, 16, []string{"short_factor[2] = 0"}},
		{Scaling{Type: "yarn", Factor: 4, BetaFast: -1}, 16, []string{"beta_fast = -1"}},
		{Scaling{Type: "yarn", Factor: 4, BetaSlow: -2}, 16, []string{"beta_slow = -2"}},
		{Scaling{Type: "yarn", Factor: 4, BetaFast: 2, BetaSlow: 8}, 16, []string{"beta_fast = 2", "beta_slow = 8"}},
		{Scaling{Type: "yarn", Factor: 4, AttentionFactor: -0.5}, 16, []string{"attention_factor = -0.5"}},
		{Scaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4}, 16, []string{"missing", "original_max_position_embeddings"}},
		{Scaling{Type: "llama3", Factor: 8, HighFreqFactor: 4, OriginalMaxPositions: 8192}, 16, []string{"missing", "low_freq_factor"}},
		{Scaling{Type: "llama3", Factor: 8, LowFreqFactor: 4, HighFreqFactor: 4, OriginalMaxPositions: 8192}, 16, []string{"high_freq_factor = 4", "low_freq_factor = 4"}},
		{Scaling{Type: "linear", Factor: 2, OriginalMaxPositions: -1}, 16, []string{"original_max_position_embeddings = -1"}},
		{Scaling{Type: "dynamic", Factor: 2}, 2, []string{"rotary dimension", "2"}},
		{Scaling{}, 7, []string{"rotary dimension 7"}},
	}
	for _, c := range cases {
		err := c.s.Validate(c.dim)
		if err == nil {
			t.Errorf("%+v (dim %d): no error", c.s, c.dim)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v (dim %d): error %q does not mention %q", c.s, c.dim, err, w)
			}
		}
	}
	for _, s := range []Scaling{
		{}, {Type: "default"}, {Type: "linear", Factor: 1}, {Type: "dynamic", Factor: 2},
		{Type: "yarn", Factor: 4, BetaFast: 32, BetaSlow: 1, OriginalMaxPositions: 4096},
		{Type: "longrope", ShortFactor: lf, LongFactor: lf, OriginalMaxPositions: 4096},
		{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192},
	} {
		if err := s.Validate(16); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

// Golden numbers from HF's own functions: transformers v4.44.2,
// src/transformers/modeling_rope_utils.py, ROPE_INIT_FUNCTIONS[rope_type](config,
// "cpu", seq_len), run unmodified with torch 1.13.1 (Debian python3-torch)
// on a minimal config object (hidden_size = dim, one head; the file's two
// imports stubbed: PretrainedConfig and a logger). HF computes in float32:
// these are its float32 tensors printed as float64; the same run with every
// tensor in float64 agrees with them to 1.1e-7 relative.
//
// longrope in v4.44.2 picks long_factor whenever max_position_embeddings
// exceeds the original length (with only factor set, always when factor >
// 1); Frequencies picks by sequence length, so the matching call uses a
// sequence longer than the original.
func TestFrequenciesMatchHFGolden(t *testing.T) {
	short := []float64{1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0}
	long := []float64{1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 48.0}
	cases := []struct {
		name         string
		s            Scaling
		theta        float64
		d, max, L    int
		attention    float64
		invFreqFloat []float64
	}{
		{"default theta 10000 d8", Scaling{Type: "default"}, 10000, 8, 512, 1, 1.0,
			[]float64{1.0, 0.10000000149011612, 0.009999999776482582, 0.0010000000474974513}},
		{"linear f4 theta 500000 d16", Scaling{Type: "linear", Factor: 4}, 500000, 16, 512, 1, 1.0,
			[]float64{0.25, 0.04848068952560425, 0.009401507675647736, 0.001823166268877685, 0.0003535533614922315, 6.856204709038138e-05, 1.3295739336172119e-05, 2.578346311565838e-06}},
		{"dynamic f2 d16 max64 L48", Scaling{Type: "dynamic", Factor: 2}, 10000, 16, 64, 48, 1.0,
			[]float64{1.0, 0.3162277638912201, 0.10000000149011612, 0.03162277862429619, 0.009999999776482582, 0.003162277862429619, 0.0010000000474974513, 0.0003162277862429619}},
		{"dynamic f2 d16 max64 L64", Scaling{Type: "dynamic", Factor: 2}, 10000, 16, 64, 64, 1.0,
			[]float64{1.0, 0.3162277638912201, 0.10000000149011612, 0.03162277862429619, 0.009999999776482582, 0.003162277862429619, 0.0010000000474974513, 0.0003162277862429619}},
		{"dynamic f2 d16 max64 L200", Scaling{Type: "dynamic", Factor: 2}, 10000, 16, 64, 200, 1.0,
			[]float64{1.0, 0.24952846765518188, 0.06226445361971855, 0.015536753460764885, 0.0038768628146499395, 0.0009673875174485147, 0.0002413907350273803, 6.0233862313907593e-05}},
		{"yarn f4 d16 max128", Scaling{Type: "yarn", Factor: 4}, 10000, 16, 128, 1, 1.138629436111989,
			[]float64{1.0, 0.23717081546783447, 0.04999999701976776, 0.007905694656074047, 0.0024999999441206455, 0.0007905694656074047, 0.0002500000118743628, 7.905694656074047e-05}},
		{"yarn f8 d32 theta 1e6 max4096 beta 16/2", Scaling{Type: "yarn", Factor: 8, BetaFast: 16, BetaSlow: 2}, 1e6, 32, 4096, 1, 1.2079441541679836,
			[]float64{1.0, 0.4216965138912201, 0.17782793939113617, 0.07498941570520401, 0.03162277862429619, 0.009445777162909508, 0.0023430888541042805, 0.00029642172739841044, 0.0001250000059371814, 5.271206100587733e-05, 2.2228492525755428e-05, 9.373678039992228e-06, 3.9528467823402025e-06, 1.6669017668391461e-06, 7.029266839708725e-07, 2.964217173939687e-07}},
		{"longrope f4 d16 max256 (long)", Scaling{Type: "longrope", Factor: 4, ShortFactor: short, LongFactor: long}, 10000, 16, 256, 257, 1.118033988749895,
			[]float64{1.0, 0.15811388194561005, 0.02500000037252903, 0.0039528473280370235, 0.0006249999860301614, 0.00013176158245187253, 3.125000148429535e-05, 6.588078576896805e-06}},
		{"longrope phi3 d16 max256 orig64 (long)", Scaling{Type: "longrope", OriginalMaxPositions: 64, ShortFactor: short, LongFactor: long}, 10000, 16, 256, 256, 1.1547005383792517,
			[]float64{1.0, 0.15811388194561005, 0.02500000037252903, 0.0039528473280370235, 0.0006249999860301614, 0.00013176158245187253, 3.125000148429535e-05, 6.588078576896805e-06}},
		{"longrope phi3 d16 max256 orig256 (short)", Scaling{Type: "longrope", OriginalMaxPositions: 256, ShortFactor: short, LongFactor: long}, 10000, 16, 256, 256, 1.0,
			[]float64{1.0, 0.2529822289943695, 0.06666667014360428, 0.015811389312148094, 0.004000000189989805, 0.0010540926596149802, 0.0002857142826542258, 7.905694656074047e-05}},
		{"llama3 f8 low1 high4 orig1024 d16", Scaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 1024}, 10000, 16, 8192, 1, 1.0,
			[]float64{1.0, 0.3162277638912201, 0.10000000149011612, 0.03162277862429619, 0.003086760640144348, 0.00039528473280370235, 0.0001250000059371814, 3.9528473280370235e-05}},
	}
	for _, c := range cases {
		if err := c.s.Validate(c.d); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, att := c.s.Frequencies(c.theta, c.d, c.max, c.L)
		checkFreqs(t, c.name, got, att, c.invFreqFloat, c.attention, 1e-6)
	}
}
