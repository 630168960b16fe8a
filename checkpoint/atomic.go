package checkpoint

import (
	"fmt"
	"io"

	"github.com/roformer-go/roformer/internal/atomicfile"
)

// writeAtomic writes path through fill with atomicfile.Write (buffered,
// synced, renamed): on any error path keeps its old content and no
// temporary file remains.
func writeAtomic(path string, fill func(w io.Writer) error) error {
	if err := atomicfile.Write(path, fill); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}
