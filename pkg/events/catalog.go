package events

import (
	"encoding/json"
	"fmt"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The live tool catalog is the key-value bucket [BucketCatalog]: key = tool name, value =
// the tool's Definition JSON. Executors put what they serve and put it again every
// [Config].CatalogTTL/3; the bucket's TTL removes the entry of a tool no executor
// refreshes any more, with a delete marker that watchers see. [CatalogEntry] is the one
// rule of what an entry must be.

// CatalogEntry reads the catalog entry stored under key: a definition whose name is the
// key and a valid tool name. An entry that is not one is an error, and its tool is not
// in the catalog (a watcher withdraws it).
func CatalogEntry(key string, value []byte) (tools.Definition, error) {
	var d tools.Definition
	if err := json.Unmarshal(value, &d); err != nil {
		return d, fmt.Errorf("catalog entry %s: value is not a definition: %w", key, err)
	}
	if d.Name != key {
		return d, fmt.Errorf("catalog entry %s: definition names %q under key %q", key, d.Name, key)
	}
	if err := ValidateTool(d.Name); err != nil {
		return d, fmt.Errorf("catalog entry %s: %w", key, err)
	}
	return d, nil
}
