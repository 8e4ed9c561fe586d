package redisstore_test

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// scriptCall is one script call a client sends: the script's operation
// (named by its first entry: allow, peek, reset, refund...) and its keys.
type scriptCall struct {
	op   string
	keys []string
}

// fault is what an injector does to one script call.
type fault int

const (
	// pass sends the call on.
	pass fault = iota
	// refuse sends, instead of the call, a script that makes the node
	// answer with an error reply: the call never ran, and the node said so.
	refuse
	// lose sends the call, which runs, and then reports its reply lost
	// (io.EOF), as when a connection breaks after the command was written.
	lose
	// hang holds the call until its context ends, as a paused node would,
	// and never sends it.
	hang
)

// refusal is the script that stands in for a refused call.
const refusal = "return redis.error_reply('BUSY redlimit test: call refused')"

// injector decides the fault of every script call a client sends, by a
// rule, and counts the calls by operation and fault.
type injector struct {
	mu    sync.Mutex
	rule  func(c scriptCall, nth int) fault // nth counts the calls of c.op on c.keys[0], from 1
	seen  map[string]int
	count map[string]int // "op/fault name"
}

func newInjector(rule func(c scriptCall, nth int) fault) *injector {
	return &injector{rule: rule, seen: map[string]int{}, count: map[string]int{}}
}

var faultNames = [...]string{pass: "pass", refuse: "refuse", lose: "lose", hang: "hang"}

func (in *injector) decide(c scriptCall) fault {
	in.mu.Lock()
	defer in.mu.Unlock()
	id := c.op + " " + c.keys[0]
	in.seen[id]++
	f := in.rule(c, in.seen[id])
	in.count[c.op+"/"+faultNames[f]]++
	return f
}

// calls returns how many calls of op got fault f.
func (in *injector) calls(op string, f fault) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.count[op+"/"+faultNames[f]]
}

// parseScriptCall recognises EVAL and EVALSHA of the store's scripts: the
// command name, the script or its SHA, the number of keys, the keys, then
// ARGV with the entries first.
func parseScriptCall(args []string) (scriptCall, bool) {
	if len(args) < 4 || !strings.EqualFold(args[0], "evalsha") && !strings.EqualFold(args[0], "eval") {
		return scriptCall{}, false
	}
	n, err := strconv.Atoi(args[2])
	if err != nil || n < 1 || len(args) < 4+n {
		return scriptCall{}, false
	}
	entries := args[3+n]
	if entries == "" {
		return scriptCall{}, false
	}
	return scriptCall{op: entryOps[entries[0]], keys: args[3 : 3+n]}, true
}

// entryOps names the operation of a call by the kind of its first entry
// (redisstore's wire.go).
var entryOps = map[byte]string{'a': "allow", 'p': "peek", 's': "allow", 'm': "admit", 'r': "reset", 'f': "refund", 'g': "giveback", 'o': "once"}

// faultyStore returns a store on the shared cluster whose client goes
// through in: a go-redis hook or a rueidis client wrapper. The scripts run
// on the real cluster; only the faults are made up.
func faultyStore(t *testing.T, goRedis bool, in *injector, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	return faultyStoreOn(t, redistest.SharedCluster(t), goRedis, in, opts...)
}

// faultyStoreOn is faultyStore on cluster c.
func faultyStoreOn(t *testing.T, cl *redistest.Cluster, goRedis bool, in *injector, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	// With the scripts loaded, every call is one EVALSHA: none is answered
	// NOSCRIPT and sent again, which would count twice here.
	for _, m := range cl.Masters() {
		if !m.Running() {
			continue
		}
		for _, src := range []string{redisstore.Script()} {
			if _, err := m.Do("SCRIPT", "LOAD", src); err != nil {
				t.Fatal(err)
			}
		}
	}
	var s *redisstore.Store
	var err error
	if goRedis {
		// Without ContextTimeoutEnabled, go-redis waits ReadTimeout (3 s)
		// for a hung node whatever the context says.
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), PoolSize: 16, ContextTimeoutEnabled: true})
		c.AddHook(goRedisFaults{in})
		t.Cleanup(func() { c.Close() })
		s, err = redisstore.NewGoRedis(c, opts...)
	} else {
		c, cerr := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs(), DisableCache: true})
		if cerr != nil {
			t.Fatal(cerr)
		}
		t.Cleanup(c.Close)
		s, err = redisstore.New(rueidisFaults{Client: c, in: in}, opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// goRedisFaults is a go-redis hook that applies an injector's faults.
type goRedisFaults struct{ in *injector }

func (goRedisFaults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (goRedisFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h goRedisFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := make([]string, len(cmd.Args()))
		for i, a := range cmd.Args() {
			args[i] = fmt.Sprint(a)
		}
		call, ok := parseScriptCall(args)
		if !ok {
			return next(ctx, cmd)
		}
		switch h.in.decide(call) {
		case refuse:
			c := redis.NewCmd(ctx, "eval", refusal, 1, call.keys[0])
			_ = next(ctx, c)
			cmd.SetErr(c.Err())
			return c.Err()
		case lose:
			if err := next(ctx, cmd); err != nil {
				return err
			}
			cmd.SetErr(io.EOF)
			return io.EOF
		case hang:
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		return next(ctx, cmd)
	}
}

// rueidisFaults is a rueidis client that applies an injector's faults.
type rueidisFaults struct {
	rueidis.Client
	in *injector
}

func (c rueidisFaults) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	call, ok := parseScriptCall(cmd.Commands())
	if !ok {
		return c.Client.Do(ctx, cmd)
	}
	switch c.in.decide(call) {
	case refuse:
		return c.Client.Do(ctx, c.Client.B().Eval().Script(refusal).Numkeys(1).Key(call.keys[0]).Build())
	case lose:
		if err := c.Client.Do(ctx, cmd).Error(); err != nil {
			return rueidis.NewErrorResult(err)
		}
		return rueidis.NewErrorResult(io.EOF)
	case hang:
		<-ctx.Done()
		return rueidis.NewErrorResult(ctx.Err())
	}
	return c.Client.Do(ctx, cmd)
}
