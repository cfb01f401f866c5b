package mcpedge

import "net/http"

// Mount serves edge at [Path] and api everywhere else: how the planner program and
// `toolfleet dev` put the edge beside the planner's API on one address.
func Mount(api, edge http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(Path, edge)
	mux.Handle("/", api)
	return mux
}
