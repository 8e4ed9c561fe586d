package redisstore

import (
	"embed"
	"strings"

	"github.com/redlimit/redlimit"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// nodesSource is the node registry's heartbeat script.
//
//go:embed lua/nodes.lua
var nodesSource string

// scriptSource is the decision script, which decides several limits at
// once, resets and refunds: the prelude, every algorithm's files,
// debit.lua, refund.lua, several.lua and decide.lua (see lua/prelude.lua).
var scriptSource = joinScript("prelude", "muldiv", "windows", "log", "fixed_window", "sliding_log", "sliding_window", "token_bucket", "debit", "refund", "several", "decide")

// singleSources are the scripts that allow or peek at one limit, by
// algorithm: the prelude, the files of the algorithm, its
// single_<algorithm>.lua (which defines <algorithm>_one), that function
// named one, and single.lua, which calls it. They call the same functions
// as the decision script, and give the answers it would, with less work
// per call.
var singleSources = [...]string{
	redlimit.FixedWindow:   singleSource("fixed_window", "windows"),
	redlimit.SlidingLog:    singleSource("sliding_log", "log"),
	redlimit.SlidingWindow: singleSource("sliding_window", "muldiv", "windows"),
	redlimit.TokenBucket:   singleSource("token_bucket"),
}

func singleSource(alg string, storage ...string) string {
	names := append([]string{"prelude"}, storage...)
	names = append(names, alg, "single_"+alg)
	return joinScript(names...) + "local one = " + alg + "_one\n" + joinScript("single")
}

// batchSource is the script that decides the decisions of several callers
// at once (see lua/batch.lua and batch.go): the prelude, every algorithm's
// files, then, defined only by a call that needs them (a script makes its
// functions anew at each call, see lua/prelude.lua), every
// single_<algorithm>.lua (load_one, for a decision alone on its key) and
// debit.lua and several.lua (load_several, for a decision of several
// limits), and batch.lua. batchCrossSlotSource is the same with Redis 7's
// allow-cross-slot-keys flag, for the batch of a Cluster node, whose keys
// span several slots.
var (
	batchSource = joinScript("prelude", "muldiv", "windows", "log", "fixed_window", "sliding_log", "sliding_window", "token_bucket") +
		loader("load_one", "fixed_window_one, sliding_log_one, sliding_window_one, token_bucket_one",
			"single_fixed_window", "single_sliding_log", "single_sliding_window", "single_token_bucket") +
		loader("load_several", "decide_limits", "debit", "several") +
		joinScript("batch")
	batchCrossSlotSource = "#!lua flags=allow-cross-slot-keys\n" + batchSource
)

// loader returns a Lua function named name that defines the functions of
// files and returns those named by ret.
func loader(name, ret string, files ...string) string {
	return "local function " + name + "()\n" + joinScript(files...) + "return " + ret + "\nend\n"
}

// onceSource is the script of a debit counted at most once per id
// (Store.DebitOnce, lua/once.lua): the prelude, every algorithm's files,
// debit.lua, several.lua and once.lua.
var onceSource = joinScript("prelude", "muldiv", "windows", "log", "fixed_window", "sliding_log", "sliding_window", "token_bucket", "debit", "several", "once")

func joinScript(names ...string) string {
	var b strings.Builder
	for _, name := range names {
		src, err := luaFiles.ReadFile("lua/" + name + ".lua")
		if err != nil {
			panic("redisstore: missing embedded script: " + err.Error()) // a build defect, not input
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	return b.String()
}

// Script returns the Lua source of the decision script, which decides
// several limits at once (AllowAll), for reading or for trying with
// redis-cli. Allowing or peeking at a single limit runs a smaller script per
// algorithm, with the same answers; see lua/single.lua.
func Script() string { return scriptSource }
