//go:build linux

package checkpoint

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// resident counts the pages of b that are in this process's memory
// (/proc/self/pagemap's present bit).
func resident(t *testing.T, b []byte) int {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skipf("no pagemap: %v", err)
	}
	defer f.Close()
	page := uintptr(os.Getpagesize())
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b))) / page
	hi := (uintptr(unsafe.Pointer(unsafe.SliceData(b))) + uintptr(len(b)) - 1) / page
	buf := make([]byte, 8*(hi-lo+1))
	if _, err := f.ReadAt(buf, int64(lo*8)); err != nil {
		t.Skipf("pagemap: %v", err)
	}
	n := 0
	for i := 0; i < len(buf); i += 8 {
		if binary.LittleEndian.Uint64(buf[i:])&(1<<63) != 0 {
			n++
		}
	}
	return n
}

// MapDir's float32 tensors lie in the file's mapping with the file's
// values; the others wait for Float32; Release and ReleaseAll drop pages
// from memory, which read the file again when touched.
func TestMapDir(t *testing.T) {
	dir := t.TempDir()
	big := make([]float32, 1<<18) // 1 MiB
	for i := range big {
		big[i] = float32(i) * 0.5
	}
	small := []float32{1, 2, 3}
	if err := WriteSafetensors(filepath.Join(dir, "model.safetensors"), []*Entry{
		{Name: "big", DType: "F32", Shape: []int{len(big)}, Data: big},
		{Name: "half", DType: "BF16", Shape: []int{3}, Data: small},
		{Name: "small", DType: "F32", Shape: []int{3}, Data: small},
	}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := MapDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Mapped() {
		t.Fatal("MapDir did not map the file")
	}
	e := f.Tensors["big"]
	if e.Data == nil || !f.Holds(Float32Bytes(e.Data)) {
		t.Fatal("an F32 tensor does not lie in the mapping")
	}
	for i, v := range e.Data {
		if v != big[i] {
			t.Fatalf("big[%d] = %v, want %v", i, v, big[i])
		}
	}
	if h := f.Tensors["half"]; h.Data != nil || len(h.Raw) != 6 {
		t.Fatalf("a BF16 tensor has %d values and %d raw bytes before Float32; want none and 6", len(h.Data), len(h.Raw))
	}
	if v, err := f.Tensors["half"].Float32(); err != nil || v[2] != 3 {
		t.Fatalf("Float32 of the BF16 tensor: %v, %v", v, err)
	}
	b := Float32Bytes(e.Data)
	if n := resident(t, b); n < len(b)/os.Getpagesize()-1 {
		t.Fatalf("%d pages resident after reading every value, want all %d", n, len(b)/os.Getpagesize())
	}
	if !f.Release(b) {
		t.Fatal("Release released nothing")
	}
	if n := resident(t, b); n > 2 {
		t.Fatalf("%d pages of the released tensor still resident", n)
	}
	if e.Data[12345] != big[12345] {
		t.Fatal("a released page read again does not hold the file's value")
	}
	if f.Release(Float32Bytes(big)) {
		t.Fatal("Release released memory outside the mapping")
	}
	for i := range e.Data { // touch all again
		_ = e.Data[i]
	}
	// "small" follows 6 bytes of BF16: not aligned for float32, so
	// decoded by Float32, its stored bytes kept.
	f.ReleaseAll(f.Tensors["small"].Raw)
	if n := resident(t, b); n > 2 {
		t.Fatalf("%d pages resident after ReleaseAll, want at most the two it shares with kept data", n)
	}
	if v, err := f.Tensors["small"].Float32(); err != nil || v[0] != 1 || v[2] != 3 {
		t.Fatalf("kept tensor reads %v, %v", v, err)
	}
}
