// Package tensor holds the plain data types shared by every other package:
// a dense float32 tensor, a trainable parameter with its gradient, and the
// conversions between the storage types found in checkpoints (F16, BF16) and
// float32. It imports only the standard library.
package tensor
