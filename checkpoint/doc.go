// Package checkpoint reads and writes tensor checkpoint files: safetensors
// and PyTorch's torch.save zip archives (pytorch_model.bin), whole or
// sharded. It knows file formats only; mapping tensor names onto a model is
// the model package's job. Every tensor is returned as float32 (Entry), with
// the stored dtype kept in Entry.DType.
//
// # safetensors
//
// (huggingface/safetensors, "Format" in its README.) A file is
//
//	[8 bytes]  N, unsigned little-endian: length of the header
//	[N bytes]  JSON object, UTF-8, usually padded with spaces
//	[rest]     data section
//
// The header maps each tensor name to {"dtype": "F32", "shape": [2, 3],
// "data_offsets": [begin, end]}, offsets in bytes from the start of the data
// section, data little-endian row-major; the optional key "__metadata__"
// maps strings to strings. ParseSafetensors checks all of it: header length
// within the file and at most MaxSafetensorsHeader, valid JSON without
// duplicate keys, a known dtype, non-negative dimensions, no element-count
// overflow, end-begin equal to numel times the element size, and tensors
// tiling the data section with no overlap, gap or trailing bytes (as the
// reference implementation requires). WriteSafetensors writes F32, F16 or
// BF16 tensors in sorted order with the header padded to a multiple of 8,
// atomically (temporary file, fsync, rename, fsync of the directory).
//
// # PyTorch zip archives
//
// torch.save (torch >= 1.6, torch/serialization.py) writes a zip archive with
// one top folder of any name (pytorch_model/, archive/) holding data.pkl,
// version, data/<key> for each storage and sometimes byteorder. data.pkl is
// a pickle (protocol 2 by default) of an OrderedDict whose values are
//
//	torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride,
//	                                requires_grad, OrderedDict())
//
// where storage is a persistent id ('storage', torch.FloatStorage, key,
// location, numel) whose raw little-endian bytes are data/<key>. Several
// tensors may share one storage (tied weights); each gets its own copy.
// Strided views are materialised in row-major order. Sharded checkpoints
// (*.index.json with a "weight_map") are read by ReadSharded and ReadDir.
//
// # Safety policy
//
// A pickle is a program: Python's unpickler imports and calls whatever
// globals it names. This package never does. The pickle runs in gopickle's
// VM, a Go interpreter of the opcodes, and every global resolves through an
// allowlist to an inert Go value:
//
//	collections.OrderedDict
//	torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter
//	torch.{Float,Half,BFloat16,Double,Long,Int,Short,Char,Byte,Bool}Storage
//
// Anything else (os.system, builtins.eval, torch.storage._load_from_bytes,
// which would run torch.load on nested bytes) is refused with an error
// wrapping ErrUnsafe that names the global. Before the VM runs, the opcode
// stream is scanned without executing it, so that disallowed globals are
// refused up front and no length field can make the VM allocate more than
// the file holds. Panics inside the VM are recovered into errors. Zip
// entries are read with size limits, and a strided view may not hold more
// elements than its storage, so a small file cannot demand unbounded memory.
//
// Integer and bool tensors (I64 position ids, for example) are converted to
// float32 only when every value is exact; otherwise loading fails with the
// tensor, index and value. Unknown dtypes wrap ErrUnsupportedDType; other
// malformed input wraps ErrFormat. Every error names the file and, where
// relevant, the tensor and the numbers involved.
package checkpoint
