//go:build !amd64

package blas

import "runtime"

// hostCPU identifies the processor; off x86-64 only the architecture is
// known here.
func hostCPU() CPUInfo { return CPUInfo{Brand: runtime.GOARCH} }
