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

// scriptParts are joined, in this order, into the script that decides
// several limits at once, resets and refunds: each algorithm file defines a
// local table that decide.lua uses.
var scriptParts = []string{"prelude", "fixed_window", "sliding_log", "sliding_window", "token_bucket", "decide"}

// scriptSource is the whole decision script.
var scriptSource = joinScript(scriptParts...)

// singleSources are the scripts that allow or peek at one limit, by
// algorithm: single.lua (arguments, time) followed by the algorithm's
// single-limit file. They give the answers the decision script would, with
// less work per call.
var singleSources = [...]string{
	redlimit.FixedWindow:   joinScript("single", "single_fixed_window"),
	redlimit.SlidingLog:    joinScript("single", "single_sliding_log"),
	redlimit.SlidingWindow: joinScript("single", "single_sliding_window"),
	redlimit.TokenBucket:   joinScript("single", "single_token_bucket"),
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

// Script returns the Lua source of the decision script, which decides
// several limits at once (AllowAll), for reading or for trying with
// redis-cli. Allowing or peeking at a single limit runs a smaller script per
// algorithm, with the same answers; see lua/single.lua.
func Script() string { return scriptSource }
