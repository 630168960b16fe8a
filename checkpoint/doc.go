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
// location, numel) whose raw little-endian bytes are data/<key>. Each
// storage is read and converted once; several tensors may view one storage
// (tied weights, offsets into a flat buffer), and a contiguous view is a
// capacity-limited subslice of the converted storage, so such tensors share
// their Data. Strided views are copied out in row-major order. Sharded
// checkpoints (*.index.json with a "weight_map") are read by ReadSharded and
// ReadDir.
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
// the file holds. Panics inside the VM are recovered into errors.
//
// # Memory bounds
//
// A file built to hurt (a few KB that declare gigabytes) is refused before
// the memory is taken. Every reader allocates at most 4 × the file's size +
// 128 MiB (the memory budget): four bytes per stored byte is what 1-byte
// elements (U8, I8, BOOL) need as float32, an F32 file needs a quarter of
// it, and the constant covers small files and the pickle machine. A file
// that would need more is refused with an error naming the tensor or entry,
// the bytes asked for and the budget. Within it:
//
//   - Zip entries (torch archives): torch.save stores them uncompressed. A
//     stored entry must declare equal compressed and uncompressed sizes; a
//     deflated one (re-packed by another tool) may expand at most 4 × its
//     compressed size + 4 KiB, checked from the zip directory before
//     inflating. The entries read (data.pkl and every storage) must lie
//     inside the file without overlapping, so one block cannot be listed as
//     many storages. Each is read through a limit at its declared size.
//   - Storages: numel × element size from the pickle must equal the entry's
//     uncompressed size (overflow-checked) before anything is allocated; the
//     float32 values are charged to the budget, and the bytes are decoded in
//     64 KiB chunks, never held whole beside their values. ReadPyTorch and
//     ReadSafetensors read from the file through its directory or header,
//     so the file itself is not held in memory either.
//   - Views: offset, sizes and strides are checked with overflow-safe
//     arithmetic against the storage; at most 64 dimensions, no negative
//     strides. Contiguous views share the storage (no copy, however many);
//     a strided view is copied, charged to the budget, and may not hold more
//     elements than its storage (no broadcast views).
//   - The pickle (data.pkl): before the VM runs, the scan simulates its
//     stack and memo (a pickle is a straight-line program) and refuses more
//     than 2^20 stacked items, 2^22 memo keys, a GET of a key never PUT,
//     numbers longer than 64 bytes, NEWOBJ_EX, and any string or bytes
//     length that runs past the data. Each opcode is at least one byte, so
//     operations are at most the pickle's size; the scan adds up what the
//     VM will allocate for each (a MARK's new stack, a container's growth, a
//     BUILD copying a dict, which is charged at the largest dict the pickle
//     could have built) and charges the total to the budget. DUP pushes a
//     reference, never a copy.
//   - safetensors: the header is at most 100 MB and within the file, each
//     header record is charged 2 KiB (what parsing and holding it costs) as
//     it is read, and the tensors must tile the data section exactly, so
//     their values take at most 4 bytes per stored byte.
//   - Shard indexes: at most 64 MiB (read through a limit), 2^20 tensors and
//     65,536 shard files; each shard is read within its own budget.
//
// Integer and bool tensors (I64 position ids, for example) are converted to
// float32 only when every value is exact; otherwise loading fails with the
// tensor, index and value. Unknown dtypes wrap ErrUnsupportedDType; other
// malformed input wraps ErrFormat. Every error names the file and, where
// relevant, the tensor and the numbers involved.
package checkpoint
