package budget

import (
	"fmt"
	"sync"
	"testing"
)

func TestCacheGetAdd(t *testing.T) {
	c, err := NewCache[string](8)
	if err != nil {
		t.Fatal(err)
	}
	k := CacheKey{Analyst: "alice", Query: "SELECT count(*) FROM t", Epsilon: 0.5, Delta: 0, Mechanism: "laplace"}
	if v, ok := c.Get(k); ok {
		t.Fatalf("Get on empty cache = %q, true", v)
	}
	c.Add(k, "answer")
	if v, ok := c.Get(k); !ok || v != "answer" {
		t.Fatalf("Get = %q, %v; want answer, true", v, ok)
	}
	// Every field of the key matters.
	for _, other := range []CacheKey{
		{Analyst: "bob", Query: k.Query, Epsilon: 0.5, Mechanism: "laplace"},
		{Analyst: "alice", Query: "SELECT sum(x) FROM t", Epsilon: 0.5, Mechanism: "laplace"},
		{Analyst: "alice", Query: k.Query, Epsilon: 0.25, Mechanism: "laplace"},
		{Analyst: "alice", Query: k.Query, Epsilon: 0.5, Delta: 1e-7, Mechanism: "laplace"},
		{Analyst: "alice", Query: k.Query, Epsilon: 0.5, Mechanism: "gaussian"},
		{Analyst: "alice", Query: k.Query, Epsilon: 0.5, Mechanism: "laplace", Params: "bounds=0,10"},
	} {
		if v, ok := c.Get(other); ok {
			t.Errorf("Get(%+v) = %q, true; want a miss", other, v)
		}
	}
}

func TestCacheEviction(t *testing.T) {
	c, err := NewCache[int](2)
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) CacheKey { return CacheKey{Analyst: "a", Query: fmt.Sprint("q", i), Epsilon: 1} }
	c.Add(key(1), 1)
	c.Add(key(2), 2)
	c.Get(key(1)) // 1 is now more recent than 2
	c.Add(key(3), 3)
	if _, ok := c.Get(key(2)); ok {
		t.Error("least recently used entry 2 was not evicted")
	}
	for _, i := range []int{1, 3} {
		if v, ok := c.Get(key(i)); !ok || v != i {
			t.Errorf("Get(%d) = %d, %v; want %d, true", i, v, ok, i)
		}
	}
	if c.Len() != 2 {
		t.Errorf("Len = %d, want 2", c.Len())
	}
}

func TestNewCacheBadSize(t *testing.T) {
	for _, n := range []int{0, -1} {
		if _, err := NewCache[int](n); err == nil {
			t.Errorf("NewCache(%d) succeeded", n)
		}
	}
}

func TestCacheConcurrent(t *testing.T) {
	c, err := NewCache[int](64)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := CacheKey{Analyst: "a", Query: fmt.Sprint(i % 100), Epsilon: float64(g % 2)}
				c.Add(k, i)
				if v, ok := c.Get(k); ok && v%100 != i%100 {
					t.Errorf("Get(%v) = %d, a value stored under another key", k, v)
				}
			}
		})
	}
	wg.Wait()
	if c.Len() > 64 {
		t.Errorf("Len = %d > size 64", c.Len())
	}
}
