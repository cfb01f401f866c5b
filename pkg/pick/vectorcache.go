package pick

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// EmbeddingsBucket is the JetStream KV bucket where tool vectors are shared between
// picker replicas (defined once, in pkg/events).
const EmbeddingsBucket = events.BucketEmbeddings

// VectorStore is a shared store of tool vectors, keyed by model and definition hash.
// A miss is (nil, nil).
type VectorStore interface {
	Get(ctx context.Context, key string) ([]float32, error)
	Put(ctx context.Context, key string, vec []float32) error
}

// KVVectorStore keeps vectors in a JetStream KV bucket as little-endian float32s, so that
// every replica embeds a tool once per model and definition.
type KVVectorStore struct {
	kv jetstream.KeyValue
}

// NewKVVectorStore opens (creating if needed) the bucket [EmbeddingsBucket] with the
// given number of replicas (1 on one server, 3 in a cluster).
func NewKVVectorStore(ctx context.Context, js jetstream.JetStream, replicas int) (*KVVectorStore, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, events.Config{Replicas: replicas}.EmbeddingsBucket())
	if err != nil {
		return nil, fmt.Errorf("embeddings bucket: %w", err)
	}
	return &KVVectorStore{kv: kv}, nil
}

// Get returns the vector under key, or nil when there is none.
func (s *KVVectorStore) Get(ctx context.Context, key string) ([]float32, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b := e.Value()
	if len(b) == 0 || len(b)%4 != 0 {
		return nil, nil // not ours; embed again and overwrite
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[i*4:]))
	}
	return v, nil
}

// Put stores vec under key.
func (s *KVVectorStore) Put(ctx context.Context, key string, vec []float32) error {
	b := make([]byte, 4*len(vec))
	for i, x := range vec {
		binary.LittleEndian.PutUint32(b[i*4:], math.Float32bits(x))
	}
	_, err := s.kv.Put(ctx, key, b)
	return err
}

// memVectors is the in-memory layer: unit vectors by definition hash, for one model.
type memVectors struct {
	mu sync.RWMutex
	m  map[string][]float32
}

func (c *memVectors) get(h string) []float32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[h]
}

func (c *memVectors) put(h string, v []float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string][]float32{}
	}
	c.m[h] = v
}
