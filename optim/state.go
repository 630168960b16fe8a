package optim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/roformer-go/roformer/tensor"
)

// stateMagic opens every serialised AdamW state.
const stateMagic = "RFADAMW\x00"

// stateVersion is the format version written by MarshalBinary.
const stateVersion = 1

// ErrCorruptState is wrapped by UnmarshalBinary when the bytes are not a
// well-formed AdamW state (bad magic, truncated, checksum mismatch).
var ErrCorruptState = errors.New("optim: corrupt optimizer state")

// MarshalBinary serialises the optimizer state: the step count and, for each
// parameter in order, its name, shape and the m and v moments. Layout, all
// integers and floats little-endian:
//
//	magic    [8]byte "RFADAMW\x00"
//	version  uint32  (1)
//	step     uint64
//	beta1, beta2, eps, weight decay  float64 (informative; not restored)
//	count    uint32  number of parameters
//	per parameter:
//	  name   uint32 length + UTF-8 bytes
//	  ndim   uint32, then ndim × uint64 dims
//	  m      numel × float32 (IEEE 754 bits)
//	  v      numel × float32
//	crc      uint32  CRC-32 (IEEE) of every preceding byte
//
// The round trip is bit-exact.
func (o *AdamW) MarshalBinary() ([]byte, error) {
	n := 8 + 4 + 8 + 32 + 4 + 4
	for i, p := range o.params {
		n += 4 + len(p.Name) + 4 + 8*len(p.Shape) + 8*len(o.m[i])
	}
	b := make([]byte, 0, n)
	b = append(b, stateMagic...)
	b = binary.LittleEndian.AppendUint32(b, stateVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(o.step))
	for _, f := range []float64{o.cfg.Beta1, o.cfg.Beta2, o.cfg.Eps, o.cfg.WeightDecay} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(o.params)))
	for i, p := range o.params {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Name)))
		b = append(b, p.Name...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Shape)))
		for _, d := range p.Shape {
			b = binary.LittleEndian.AppendUint64(b, uint64(d))
		}
		for _, s := range [][]float32{o.m[i], o.v[i]} {
			for _, x := range s {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
			}
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b)), nil
}

// UnmarshalBinary restores a state written by MarshalBinary into o. The
// saved parameters must be exactly o's parameters, by name and shape (order
// may differ); otherwise it returns an error naming the parameter and both
// shapes and leaves o unchanged.
func (o *AdamW) UnmarshalBinary(b []byte) error {
	if len(b) < 8+4+8+32+4+4 || string(b[:8]) != stateMagic {
		return fmt.Errorf("%w: not an AdamW state (bad magic or %d bytes)", ErrCorruptState, len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc32.ChecksumIEEE(body); got != sum {
		return fmt.Errorf("%w: checksum %08x, stored %08x", ErrCorruptState, got, sum)
	}
	r := reader{b: body, off: 8}
	if v := r.u32(); v != stateVersion {
		return fmt.Errorf("optim: optimizer state version %d, this build reads version %d", v, stateVersion)
	}
	step := int64(r.u64())
	r.off += 32
	count := int(r.u32())
	index := make(map[string]int, len(o.params))
	for i, p := range o.params {
		index[p.Name] = i
	}
	m := make([][]float32, len(o.params))
	v := make([][]float32, len(o.params))
	for k := 0; k < count && r.err == nil; k++ {
		name := string(r.bytes(int(r.u32())))
		ndim := int(r.u32())
		if ndim > 16 {
			return fmt.Errorf("%w: parameter %q has %d dimensions", ErrCorruptState, name, ndim)
		}
		shape := make([]int, ndim)
		for d := range shape {
			shape[d] = int(r.u64())
		}
		if r.err != nil {
			break
		}
		i, ok := index[name]
		if !ok {
			return fmt.Errorf("optim: optimizer state has parameter %q (shape %v) that the model lacks", name, shape)
		}
		p := o.params[i]
		if !tensor.SameShape(shape, p.Shape) {
			return fmt.Errorf("optim: optimizer state for %q has shape %v, the parameter has shape %v", name, shape, p.Shape)
		}
		if m[i] != nil {
			return fmt.Errorf("%w: parameter %q saved twice", ErrCorruptState, name)
		}
		m[i], v[i] = r.f32s(len(p.Data)), r.f32s(len(p.Data))
	}
	if r.err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptState, r.err)
	}
	if r.off != len(body) {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorruptState, len(body)-r.off)
	}
	for i, p := range o.params {
		if m[i] == nil {
			return fmt.Errorf("optim: optimizer state lacks parameter %q (shape %v)", p.Name, p.Shape)
		}
	}
	o.step, o.m, o.v = step, m, v
	return nil
}

// reader decodes little-endian values and remembers the first overrun.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b)-r.off {
		if r.err == nil {
			r.err = fmt.Errorf("truncated at byte %d (need %d more, have %d)", r.off, n, len(r.b)-r.off)
		}
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *reader) u32() uint32 {
	if s := r.bytes(4); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if s := r.bytes(8); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

func (r *reader) f32s(n int) []float32 {
	if n > (len(r.b)-r.off)/4 {
		r.bytes(4 * n) // records the overrun
		return nil
	}
	s := r.bytes(4 * n)
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(s[4*i:]))
	}
	return out
}
