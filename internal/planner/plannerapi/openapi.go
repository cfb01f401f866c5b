package plannerapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"gopkg.in/yaml.v3"
)

// openAPIYAML is the OpenAPI 3.1 document of the API, written as YAML (its schemas are
// JSON Schema 2020-12); GET /openapi.json serves it as JSON. TestOpenAPIConformance
// checks it against the routes and against real requests and answers.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPI returns the OpenAPI document of the API, as JSON.
var OpenAPI = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openAPIYAML, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	return json.Marshal(doc)
})

// serveOpenAPI is GET /openapi.json.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	doc, err := OpenAPI()
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}
