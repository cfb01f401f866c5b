package deploytest

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yannh/kubeconform/pkg/validator"
)

// The schemas the manifests are validated against, from the Go modules that ship them
// (go mod download fetches each once into the module cache; later runs are offline):
// Kubernetes' OpenAPI v3 documents (k8s.io/kubernetes, api/openapi-spec/v3), and the
// CustomResourceDefinitions of the Prometheus Operator and KEDA.
const (
	kubernetesModule = "k8s.io/kubernetes@v1.34.0"
	promOperatorCRDs = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
	kedaCRDs         = "github.com/kedacore/keda/v2@v2.20.0"
)

// Every overlay, with the Prometheus component added, renders to objects that are valid
// for their kinds' schemas, strictly (a field no schema names is an error): the
// Kubernetes API's for its own kinds, the CRDs' for PodMonitor, PrometheusRule and
// ScaledObject. Nothing is skipped for want of a schema.
func TestRenderedManifestsValidate(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads the schema modules on its first run")
	}
	schemas := t.TempDir()
	writeAPISchemas(t, schemas, filepath.Join(moduleDir(t, kubernetesModule), "api", "openapi-spec", "v3"))
	op := moduleDir(t, promOperatorCRDs)
	for _, crd := range []string{"monitoring.coreos.com_podmonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"} {
		writeCRDSchemas(t, schemas, filepath.Join(op, "example", "prometheus-operator-crd", crd))
	}
	writeCRDSchemas(t, schemas, filepath.Join(moduleDir(t, kedaCRDs), "config", "crd", "bases", "keda.sh_scaledobjects.yaml"))

	v, err := validator.New([]string{filepath.Join(schemas, "{{ .Group }}", "{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json")},
		validator.Opts{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	k8s := filepath.Join(repoRoot(t), "deploy", "k8s")
	for _, ov := range overlays {
		t.Run(ov.dir, func(t *testing.T) {
			out := renderRaw(t, withComponent(t, k8s, ov.dir))
			kinds := map[string]int{}
			for _, res := range v.Validate(ov.dir, io.NopCloser(bytes.NewReader(out))) {
				sig, _ := res.Resource.Signature()
				what := "?"
				if sig != nil {
					what = sig.Kind + "/" + sig.Name
					kinds[sig.Kind]++
				}
				switch res.Status {
				case validator.Valid, validator.Empty:
				default:
					t.Errorf("%s: %v %v", what, res.Err, res.ValidationErrors)
				}
			}
			for _, k := range []string{"Deployment", "StatefulSet", "PodMonitor", "PrometheusRule", "ConfigMap"} {
				if kinds[k] == 0 {
					t.Errorf("no %s validated", k)
				}
			}
		})
	}

	// The validation is not vacuous: a misspelt field is refused, in a rule and in a
	// Deployment's container.
	for what, bad := range map[string]string{
		"a PrometheusRule with fore:": "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: x}\n" +
			"spec:\n  groups:\n    - name: g\n      rules:\n        - alert: A\n          expr: up == 0\n          fore: 5m\n",
		"a Deployment with imagePullPolice:": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  selector: {matchLabels: {a: b}}\n" +
			"  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers:\n        - {name: c, image: i, imagePullPolice: Always}\n",
	} {
		if res := v.Validate(what, io.NopCloser(strings.NewReader(bad))); len(res) != 1 || res[0].Status != validator.Invalid {
			t.Errorf("%s validated as %+v, want invalid", what, res)
		}
	}
}

// withComponent writes a kustomization that adds components/prometheus to overlay and
// returns its directory.
func withComponent(t *testing.T, k8s, overlay string) string {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string { // kustomize takes relative paths only
		r, err := filepath.Rel(dir, filepath.Join(k8s, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
		"resources: [" + rel(overlay) + "]\ncomponents: [" + rel("components/prometheus") + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// renderRaw is render's YAML, as kubectl kustomize prints it.
func renderRaw(t *testing.T, dir string) []byte {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not on PATH: cannot render the kustomizations")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return out
}

// moduleDir downloads a module version into the module cache (once) and returns its
// directory.
func moduleDir(t *testing.T, modVersion string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", modVersion)
	cmd.Dir = t.TempDir() // outside this module: its go.mod needs no entry
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); jerr != nil || err != nil || m.Error != "" || m.Dir == "" {
		t.Fatalf("go mod download %s: %v %s %s", modVersion, err, m.Error, out)
	}
	return m.Dir
}

// schemaFile is where the validator looks for a kind's schema: <group>/<kind>_<version>.json,
// the core group being its version.
func schemaFile(dir, group, version, kind string) string {
	if group == "" {
		group = version
	}
	return filepath.Join(dir, group, strings.ToLower(kind)+"_"+version+".json")
}

func writeSchema(t *testing.T, path string, schema any) {
	t.Helper()
	b, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeAPISchemas writes a JSON schema for every kind of Kubernetes' OpenAPI v3
// documents: the kind's schema by reference, with the document's schemas beside it, each
// object closed to fields it does not name (strict).
func writeAPISchemas(t *testing.T, dir, specDir string) {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(specDir, "*__v*_openapi.json"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no OpenAPI documents in %s (%v)", specDir, err)
	}
	n := 0
	for _, f := range docs {
		var doc struct {
			Components struct {
				Schemas map[string]any `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(readFile(t, f), &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		closeObjects(doc.Components.Schemas) // all of them before any is written with them
		for name, s := range doc.Components.Schemas {
			for _, gvk := range list(s, "x-kubernetes-group-version-kind") {
				if str(gvk, "kind") == "" || strings.HasSuffix(str(gvk, "kind"), "List") {
					continue
				}
				writeSchema(t, schemaFile(dir, str(gvk, "group"), str(gvk, "version"), str(gvk, "kind")), map[string]any{
					"$ref":       "#/components/schemas/" + name,
					"components": map[string]any{"schemas": doc.Components.Schemas},
				})
				n++
			}
		}
	}
	if n < 50 {
		t.Fatalf("only %d kinds in %s", n, specDir)
	}
}

// writeCRDSchemas writes the JSON schema of every served version of a
// CustomResourceDefinition, strict like the API's.
func writeCRDSchemas(t *testing.T, dir, crdFile string) {
	t.Helper()
	crd := decodeAll(t, crdFile, readFile(t, crdFile))[0]
	// The YAML decoder's maps are map[string]any already; a JSON round trip makes their
	// numbers and keys what the validator expects.
	b, err := json.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	var c any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	group, kind := str(c, "spec", "group"), str(c, "spec", "names", "kind")
	written := 0
	for _, v := range list(c, "spec", "versions") {
		s := get(v, "schema", "openAPIV3Schema")
		if s == nil || get(v, "served") != true {
			continue
		}
		closeObjects(s)
		writeSchema(t, schemaFile(dir, group, str(v, "name"), kind), s)
		written++
	}
	if written == 0 {
		t.Fatalf("%s: no served version with a schema", crdFile)
	}
}

// closeObjects sets additionalProperties: false on every object schema under s that
// names its properties and allows no others by its own word (as kubeconform's strict
// schemas do), so that a misspelt field is an error.
func closeObjects(s any) {
	switch v := s.(type) {
	case map[string]any:
		_, props := v["properties"]
		_, extra := v["additionalProperties"]
		if props && !extra && v["x-kubernetes-preserve-unknown-fields"] != true {
			v["additionalProperties"] = false
		}
		for _, c := range v {
			closeObjects(c)
		}
	case []any:
		for _, c := range v {
			closeObjects(c)
		}
	}
}
