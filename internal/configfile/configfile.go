// Package configfile reads a model folder's config.json within a size
// limit, the one bounded read behind model/roformer's and model/seq2seq's
// LoadConfig.
package configfile

import (
	"fmt"
	"io"
	"os"
)

// Read returns the content of the file at path, reading at most limit+1
// bytes: a file larger than limit bytes is an error naming the path and the
// limit (the callers' MaxConfigBytes), not an allocation of its size. The
// errors carry no package prefix; callers add their own.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes, the limit for a config.json (MaxConfigBytes)", path, limit)
	}
	return data, nil
}
