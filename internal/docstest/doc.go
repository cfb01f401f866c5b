// Package docstest keeps the documentation true: its tests run the shell snippets of
// README.md and docs/*.md against a real fleet, and check the API reference against the
// OpenAPI document.
//
// # Marking a snippet
//
// Every ```sh block of README.md and docs/*.md is marked by an HTML comment on the line
// before its fence, which markdown renders as nothing:
//
//	<!-- docstest: run -->
//	<!-- docstest: run; expect "a text the output must hold" "another" -->
//	<!-- docstest: skip (why: needs docker, a real model, the nats CLI, npx, ...) -->
//
// A block without a mark fails the test, so that no new snippet goes untested by
// accident. A skip needs its reason; the test lists every skipped block with it (go
// test -v). Other fences (go, yaml, json, plain output) are not run.
//
// # How a snippet runs
//
// TestSnippets builds the toolfleet binary, starts `toolfleet dev` on free ports with the
// offline scripted model, and runs each marked block, in the order of the files (README
// first, then docs/ by name), with bash -e from the repository root. The
// documented default addresses (127.0.0.1:8080 or localhost:8080 for the API,
// 127.0.0.1:4222 for NATS, 127.0.0.1:9090 for the ops server) are replaced by the test
// fleet's, TOOLFLEET_API_URL, TOOLFLEET_NATS_URL and TOOLFLEET_OPS_ADDR point the CLI
// (and `toolfleet health`) at it, and the binary's folder (which is also GOBIN,
// for `go install ./cmd/toolfleet`) comes first on PATH. A block passes when it exits 0
// within a minute and its output holds every text its mark expects. Blocks share the fleet, so one may rely on what the blocks before it
// did, never on what comes after.
//
// The snippets need curl; a machine without it fails the test saying so (.ci/run
// installs it).
package docstest
