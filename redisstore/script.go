package redisstore

import (
	"embed"
	"strconv"
	"strings"

	"github.com/redlimit/redlimit"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// nodesSource is the node registry's heartbeat script.
//
//go:embed lua/nodes.lua
var nodesSource string

// batchSource is the decision script: every call of the Store is one run
// of it (see lua/batch.lua and wire.go). It joins the prelude; the lone
// path (lua/lone.lua), which decides a batch of one decision of one limit
// with the files of its algorithm only; every algorithm's files; then,
// defined only by a call that needs them (a script makes its functions
// anew at each call, see lua/prelude.lua): every single_<algorithm>.lua
// (load_one, for a decision alone on its key), debit.lua, several.lua and
// once.lua (load_several, for an entry of several limits or a debit
// once), refund.lua (load_more, for resets and refunds); and batch.lua.
// batchCrossSlotSource is the same with Redis 7's allow-cross-slot-keys
// flag, for the batch of a Cluster node, whose keys span several slots.
var (
	batchSource = joinScript("prelude", "lone") +
		lone("fixed_window", "windows") +
		lone("sliding_log", "log") +
		lone("sliding_window", "muldiv", "windows") +
		lone("token_bucket") +
		joinScript("muldiv", "windows", "log", "fixed_window", "sliding_log", "sliding_window", "token_bucket") +
		loader("load_one", "fixed_window_one, sliding_log_one, sliding_window_one, token_bucket_one",
			"single_fixed_window", "single_sliding_log", "single_sliding_window", "single_token_bucket") +
		loader("load_several", "decide_limits, once_limit", "debit", "several", "once") +
		loader("load_more", "change_limits", "refund") +
		joinScript("batch")
	batchCrossSlotSource = "#!lua flags=allow-cross-slot-keys\n" + batchSource
)

// lone returns the lone path of alg (lua/lone.lua): a block, run when the
// batch is a lone decision of alg, that defines the functions of storage,
// alg and single_<alg>, and decides it (lua/lone_decide.lua).
func lone(alg string, storage ...string) string {
	id := strconv.Itoa(int(algorithmOf[alg]))
	return "if lone_alg == '" + id + "' then\n" + joinScript(append(storage, alg, "single_"+alg)...) +
		"local one = " + alg + "_one\n" + joinScript("lone_decide") + "end\n"
}

// algorithmOf is the algorithm of each algorithm's file.
var algorithmOf = map[string]redlimit.Algorithm{
	"fixed_window": redlimit.FixedWindow, "sliding_log": redlimit.SlidingLog,
	"sliding_window": redlimit.SlidingWindow, "token_bucket": redlimit.TokenBucket,
}

// loader returns a Lua function named name that defines the functions of
// files and returns those named by ret.
func loader(name, ret string, files ...string) string {
	return "local function " + name + "()\n" + joinScript(files...) + "return " + ret + "\nend\n"
}

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

// Script returns the Lua source of the decision script, which every call
// of the Store runs (see lua/batch.lua), for reading or for trying with
// redis-cli.
func Script() string { return batchSource }
