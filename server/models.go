package server

import "net/http"

// GET /v1/models: OpenAI's list of models, which OpenAI's clients and the frameworks built on them ask
// for before they call /v1/embeddings. The server has one model, named
// Options.Name (roformer serve --served-model-name; by default the model
// folder's name); created is when the server started.

// OpenAIModel is one model of GET /v1/models.
type OpenAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`  // "model"
	Created int64  `json:"created"` // Unix seconds: when the server started
	OwnedBy string `json:"owned_by"`
}

// OpenAIModelList is the answer of GET /v1/models.
type OpenAIModelList struct {
	Object string        `json:"object"` // "list"
	Data   []OpenAIModel `json:"data"`
}

func (s *Server) openAIModels(w http.ResponseWriter, r *http.Request) {
	m := OpenAIModel{ID: s.opts.Name, Object: "model", Created: s.started.Unix(), OwnedBy: "roformer"}
	writeJSON(w, http.StatusOK, OpenAIModelList{Object: "list", Data: []OpenAIModel{m}})
}
