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
// of it (see lua/batch.lua and wire.go). A script makes its functions anew
// at each call (see lua/prelude.lua). So each block below defines only
// what its path calls, and runs only when the call takes it. In order:
//   - the prelude;
//   - the lone decision of one limit (lua/lone.lua), one block per
//     algorithm with its files only;
//   - every algorithm's files;
//   - the lone entry of another kind (lua/lone_other.lua), with the files
//     of its kind;
//   - for batches, loaders that the first entry needing them calls: every
//     single_<algorithm>.lua (load_one, a decision alone on its key), the
//     files of several limits (load_several), of resets and refunds
//     (load_more) and of leases (load_lease);
//   - batch.lua.
//
// batchCrossSlotSource is the same with Redis 7's allow-cross-slot-keys
// flag, for the batch of a Cluster node, whose keys span several slots.
var (
	batchSource = joinScript("prelude", "lone") +
		lone("fixed_window", "windows") +
		lone("sliding_log", "log") +
		lone("sliding_window", "muldiv", "windows") +
		lone("token_bucket") +
		joinScript("sized", "muldiv", "windows", "log", "fixed_window", "sliding_log", "sliding_window", "token_bucket") +
		when("lone_kind == SEVERAL or lone_kind == ADMIT or lone_kind == ONCE", append(severalFiles, "lone_other")...) +
		when("lone_kind == QUEUE or lone_kind == UNQUEUE", "queue", "lone_other") +
		when("lone_kind == ACQUIRE or lone_kind == RENEW or lone_kind == RELEASE", "lease", "lone_other") +
		when("lone_kind ~= nil", append(moreFiles, "lone_other")...) +
		loader("load_one", "fixed_window_one, sliding_log_one, sliding_window_one, token_bucket_one",
			"single_fixed_window", "single_sliding_log", "single_sliding_window", "single_token_bucket") +
		loader("load_several", "entry", severalFiles...) +
		loader("load_more", "entry", moreFiles...) +
		loader("load_queue", "entry", "queue") +
		loader("load_lease", "entry", "lease") +
		joinScript("batch")
	batchCrossSlotSource = "#!lua flags=allow-cross-slot-keys\n" + batchSource

	// The files of the entries of several limits and debits once, and of
	// resets and refunds: each defines entry (batch.lua).
	severalFiles = []string{"debit", "several", "once"}
	moreFiles    = []string{"refund"}
)

// lone returns the block of a lone decision of alg (lua/lone.lua): the
// files of storage, alg and single_<alg>, then lua/lone_decide.lua with
// <alg>_one as one.
func lone(alg string, storage ...string) string {
	id := strconv.Itoa(int(algorithmOf[alg]))
	return "if lone_alg == '" + id + "' then\n" + joinScript(append(storage, alg, "single_"+alg)...) +
		"local one = " + alg + "_one\n" + joinScript("lone_decide") + "end\n"
}

// when returns a block of files run only when the Lua condition cond holds.
func when(cond string, files ...string) string {
	return "if " + cond + " then\n" + joinScript(files...) + "end\n"
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
