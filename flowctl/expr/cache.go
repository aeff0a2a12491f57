package expr

import (
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
)

// DefaultCacheSize is how many programs a Cache keeps when its size is not given.
const DefaultCacheSize = 4096

// Cache compiles each (variables, text) once and keeps the program: definitions and
// waits evaluate the same few expressions over and over. When full it is emptied (the
// programs of live definitions are compiled again on their next use). Safe for
// concurrent use.
type Cache struct {
	max  int
	mu   sync.Mutex
	envs map[string]*cel.Env
	prgs map[string]*Program
	errs map[string]error
}

// NewCache makes a cache of at most max programs (DefaultCacheSize when max ≤ 0).
func NewCache(max int) *Cache {
	if max <= 0 {
		max = DefaultCacheSize
	}
	return &Cache{max: max, envs: map[string]*cel.Env{}, prgs: map[string]*Program{}, errs: map[string]error{}}
}

// Compile is the package's Compile, remembered (a compile error too).
func (c *Cache) Compile(src string, vars ...string) (*Program, error) {
	names := strings.Join(vars, ",")
	key := names + "\x00" + src
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.prgs[key]; ok {
		return p, nil
	}
	if err, ok := c.errs[key]; ok {
		return nil, err
	}
	env, ok := c.envs[names]
	if !ok {
		var err error
		if env, err = newEnv(vars); err != nil {
			return nil, err
		}
		c.envs[names] = env
	}
	p, err := compile(env, src, vars)
	if len(c.prgs)+len(c.errs) >= c.max {
		clear(c.prgs)
		clear(c.errs)
	}
	if err != nil {
		c.errs[key] = err
		return nil, err
	}
	c.prgs[key] = p
	return p, nil
}
