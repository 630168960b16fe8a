package server

import (
	"embed"
	"io/fs"
	"net/http"
)

// The page at GET /: plain HTML, CSS and JavaScript in web/, embedded in
// the binary (no CDN, no external fonts or scripts), with a panel per task
// of the live API. The page reads GET /info's routes and shows only the
// panels whose route answers for the loaded model; an error answer's
// message is shown in its panel.
//
//go:embed web/index.html web/app.js web/style.css
var webFiles embed.FS

var webFS, _ = fs.Sub(webFiles, "web")

// registerWeb adds the page: GET / (index.html) and GET /web/… (its script
// and style sheet). Other paths, and other methods on /, stay with the
// mux's catch-all (a JSON 404 or 405).
func (s *Server) registerWeb() {
	files := http.StripPrefix("/web/", http.FileServerFS(webFS))
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, webFS, "index.html")
	})
	s.mux.HandleFunc("GET /web/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/web/" {
			writeError(w, http.StatusNotFound, "no endpoint %s %s (see GET /v1/model)", r.Method, r.URL.Path)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
