package hub_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/roformer-go/roformer/hub"
)

// Download a model from a server that answers like the Hub (here a local
// stand-in; by default Download asks https://huggingface.co), then find it
// again by its name.
func Example() {
	const commit = "1111111111111111111111111111111111111111"
	files := map[string]string{"config.json": `{"hidden_size": 8}`, "model.safetensors": "weights"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/models/") {
			fmt.Fprintf(w, `{"sha": %q, "siblings": [{"rfilename": "config.json"}, {"rfilename": "model.safetensors"}]}`, commit)
			return
		}
		body := files[r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]]
		sum := sha256.Sum256([]byte(body))
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		fmt.Fprint(w, body)
	}))
	defer srv.Close()

	cache, _ := os.MkdirTemp("", "hf-cache")
	defer os.RemoveAll(cache)
	dir, err := hub.Download(context.Background(), "org/tiny", "main", hub.Options{CacheDir: cache, Endpoint: srv.URL})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.TrimPrefix(dir, cache))

	again, _ := hub.ResolveIn(cache, "org/tiny")
	config, _ := os.ReadFile(filepath.Join(again, "config.json"))
	fmt.Println(again == dir, string(config))

	_, err = hub.ResolveIn(cache, "org/absent")
	fmt.Println(err != nil)
	// Output:
	// /models--org--tiny/snapshots/1111111111111111111111111111111111111111
	// true {"hidden_size": 8}
	// true
}
