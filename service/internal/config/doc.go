// Package config loads envoyproxy/ratelimit-compatible rule files, validates
// them, and matches request descriptors to rules.
//
// [Load] reads a file or a directory of files into a [Config]; [Config.Match]
// finds the [Rule] for a request descriptor; [Config.Rules] lists every rule,
// and a Rule marshals to JSON as its [RuleView]. A Config is immutable and
// safe for concurrent use: to reload, load a new one and swap the pointer.
//
// # Files
//
// Each file holds one domain, and no two files may hold the same one,
// unless [Loader].MergeDomains merges them (the --merge-domains flag,
// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG): the top-level descriptors of
// the files of one domain then make one tree, in the order the files are
// read, each file's rules with its own file-level defaults, and a replaces
// may name a rule of another file of the domain. Two top-level descriptors
// of one name in two files are an error, as in one file.
//
// [Load] takes a file, or a directory whose *.yaml and *.yml files it reads
// in name order, without descending into subdirectories. Entries whose names
// start with "." are skipped, and so are files with other extensions, so
// that the layout of a Kubernetes ConfigMap volume loads as expected:
//
//	/etc/redlimit/api.yaml -> ..data/api.yaml
//	/etc/redlimit/..data -> ..2024_05_01_10_00_00.000000001
//	/etc/redlimit/..2024_05_01_10_00_00.000000001/api.yaml
//
// An empty directory is a valid Config with no domains: every request is
// then allowed, as for any domain no file defines.
//
// Only regular files are read, after following symbolic links: a named
// pipe, a device or a socket, named as the path or found in the directory
// under a rule file's name, is an error ([ErrNotRegular]), found without
// waiting on it. A file is refused above 4 MiB, and the files of a load
// above 16 MiB together ([ErrTooLarge]; [Loader] sets other caps), which
// bounds the memory a load takes (docs/OPERATIONS.md, "Sizing").
//
// # Format
//
// Files written for envoyproxy/ratelimit load unchanged, with the same
// meaning (see "Differences" below for the few exceptions):
//
//	domain: api                    # required, unique among the files (unless merged)
//	algorithm: sliding_window      # redlimit: the file's default algorithm
//	failure_policy: local          # redlimit: the file's default failure policy
//	counting: auto                 # redlimit: the file's default counting
//	descriptors:
//	  - key: remote_address        # required
//	    value: 10.0.0.1            # optional; "*" in it is a wildcard
//	    rate_limit:                # optional: no rate_limit, no limit here
//	      name: per_ip             # optional, for replaces
//	      unit: second             # second, minute, hour, day, week, month (30 days), year (365 days)
//	      unit_multiplier: 30      # redlimit: the period is 30 units (default 1)
//	      requests_per_unit: 10    # 0 (deny all) to 4294967295, per period
//	      unlimited: false         # true: always allowed; then no unit
//	      replaces:                # this rule replaces the named rules when both match
//	        - name: other_rule
//	      algorithm: token_bucket  # redlimit: overrides the file's default
//	      burst: 20                # redlimit: token_bucket only
//	      failure_policy: fail_open # redlimit: overrides the file's default
//	      counting: admission      # redlimit: overrides the file's default
//	    shadow_mode: false         # true: decide and count, never deny
//	    quota_mode: false          # true: deny only when every quota of the request is spent
//	    detailed_metric: false     # true: metrics name the request's values
//	    value_to_metric: false     # true: metrics name the request's value at this level
//	    share_threshold: false     # true, on a wildcard value: every match shares one limit
//	    metadata:                  # any mapping: returned as the response's dynamic metadata
//	      upstream: {name: primary}
//	    descriptors:               # nested descriptors, the same shape
//	      - key: path
//	        value: /login
//
// Unit names are case-insensitive ("SECOND" works), as are algorithm and
// policy names. Values are taken as written ("value: 500" is the string
// "500"), booleans also accept YAML 1.1's yes, no, on and off, integers
// accept 0x, 0o and "_" separators, and anchors, aliases and merge keys
// ("<<") work. An optional key that is null (such as "value: ~") counts as
// absent.
//
// shadow_mode, quota_mode, detailed_metric and metadata belong to the
// descriptor's rate_limit: on a descriptor without one they do nothing.
// What they and value_to_metric and share_threshold do:
//
//   - shadow_mode: the rule is decided and counted but never denies
//     (package rls, "Shadow mode").
//   - quota_mode: the rule is a quota, as in envoyproxy/ratelimit: a
//     request is denied for its quotas only when every quota rule it
//     carries is spent (a quota over its limit still answers OVER_LIMIT
//     in its own status). With several backends each under a quota, a
//     request passes while one of them has room, and the response's
//     metadata names those that do (package rls, "Quotas").
//   - metadata: any mapping, returned in the response's dynamic metadata
//     (under "metadata", merged over the rules the request passed; the
//     service's --response-dynamic-metadata) for Envoy to route or log on,
//     such as %DYNAMIC_METADATA(envoy.filters.http.ratelimit:metadata:upstream:name)%.
//     Values are read as envoyproxy/ratelimit's YAML 1.1 parser reads
//     them: yes, no, on and off unquoted are booleans, numbers are
//     numbers, a timestamp is its text.
//   - detailed_metric and value_to_metric: the rule's metrics are named
//     by the request's values, as [Rule.MetricName] says.
//   - share_threshold, on a descriptor whose value is a wildcard: every
//     value it matches counts against one limit, as envoy's README has it
//     ("files/*" with share_threshold: true gives files/a.pdf and
//     files/b.csv one limit of 10 an hour; without it, each its own). It
//     applies to the rule matched through the descriptor, at its depth or
//     deeper, whose key then holds the pattern instead of the request's
//     value ([Descriptor.KeyValue]), and to its metrics' name.
//
// # Extensions
//
// redlimit adds five settings, which envoyproxy/ratelimit does not have:
//
//   - algorithm: fixed_window, sliding_log, sliding_window or token_bucket
//     (see package redlimit). At the top of a file it sets the default of its
//     rules; the default default is sliding_window. In a rate_limit it
//     overrides the file's default.
//   - burst: the token bucket's capacity, 1 or more. It defaults to
//     requests_per_unit, so a quiet key may spend a whole unit's allowance
//     at once, then gets requests_per_unit evenly spread over each unit. It
//     is an error with any other algorithm.
//   - failure_policy: local, fail_open or fail_closed: what a request gets
//     when Redis cannot be asked (see package resilient). At the top of a
//     file it sets the default of its rules; the default default is local.
//   - unit_multiplier: how many units make the period, 1 (the default) to
//     as many as make redlimit.MaxPeriod: unit: second with
//     unit_multiplier: 30 is 30 seconds, unit: hour with 6 is six hours.
//     requests_per_unit is then per period. The name and meaning are those
//     of Envoy's own limit override (RateLimitOverride.unit_multiplier), and
//     the service answers it in current_limit.unit_multiplier.
//   - counting: auto, admission or debit, how a rule counts the hits of a
//     request that does not fit ([Counting]). admission: a request that
//     does not fit is denied and consumes nothing (redlimit's way). debit:
//     every hit is counted, over the limit too, as envoyproxy/ratelimit
//     counts, which may take the key into debt. auto: debit for a
//     descriptor that carries its own hits_addend (Envoy's check-then-debit
//     flow of cost budgets: a check with hits_addend 0 before the work, the
//     measured cost after it), admission for any other. At the top of a
//     file it sets the default of its rules; without either, the service's
//     --counting applies, whose default is auto.
//
// Every limit is checked as [redlimit.Limit.Validate] does, so the service
// never meets an invalid one: a sliding_log limit above
// [redlimit.MaxLogCount] requests per unit, or a burst too large for its
// rate, is a load error.
//
// # Matching
//
// A request descriptor is a list of (key, value) entries; it is matched one
// level of the tree per entry, as envoyproxy/ratelimit does. At each level
// the entry selects, among the descriptors with its key:
//
//  1. the one whose value is the entry's value (for a non-empty value);
//  2. else the first, in file order, whose value is a wildcard the entry's
//     value matches: each "*" stands for any run of characters, the empty
//     one included ("/api/*" matches "/api/" and "/api/v1/users",
//     "/api/*/action" matches "/api/42/action");
//  3. else the one with no value.
//
// If no descriptor is selected, nothing matches: there is no backtracking
// to a less specific descriptor. After the last entry, the descriptor
// reached gives its rate_limit, if it has one. So a rule applies only to
// request descriptors of exactly its depth: with
//
//	descriptors:
//	  - key: tenant
//	    value: acme
//	    descriptors:
//	      - key: user
//	        rate_limit: {unit: minute, requests_per_unit: 60}
//
// (tenant=acme, user=bob) gets 60 a minute, but (tenant=acme) and
// (tenant=acme, user=bob, path=/) get no limit, nor does (tenant=other,
// user=bob). A descriptor with no rate_limit and no children therefore
// exempts its value from the rules of its key alone.
//
// # Differences from envoyproxy/ratelimit
//
// redlimit rejects a few files envoyproxy/ratelimit accepts, where that one
// would do something the file most likely does not mean, or that redlimit
// cannot do:
//
//   - no requests_per_unit, which envoy reads as 0. Write
//     requests_per_unit: 0 to deny every request of a descriptor (a block
//     list entry, as in envoy's README): redlimit loads it as envoy does,
//     and answers OVER_LIMIT without counting anything (Rule.DenyAll).
//   - a unit beside unlimited: true (envoy rejects the valid unit names
//     there, and ignores a misspelt one); requests_per_unit beside
//     unlimited: true is ignored, as in envoy.
//   - a replaces name that no rule of the domain has.
//   - two descriptors of one level whose envoy names "key_value" collide,
//     such as key "a_b" and key "a" with value "b" (envoy rejects two of
//     the same key and value; it keys both of these as "a_b").
//   - two YAML documents in one file (envoy reads the first only).
//   - share_threshold: true on a descriptor whose value holds no "*" (envoy
//     rejects it too, unless the key holds one).
//   - metadata that is not a mapping, holds a number that is not finite
//     (.nan, .inf: JSON has none), or nests more than 32 deep.
//
// Wildcards compare the key exactly and match the value, where
// envoyproxy/ratelimit matches the pattern "key_value*" against
// "key_value" strings, so that there the entry (a_b, c) can select the
// descriptor key "a" value "b*".
//
// # Errors
//
// Every problem in a file is reported, up to 20, each as an [*Error]
// wrapping [ErrInvalid] that names the file, the line and the field:
//
//	rules/api.yaml:12: descriptors[0].rate_limit.unit: unknown unit "fortnight" (want second, minute, hour, day, week, month, year)
//
// Unknown keys are errors (with a suggestion for a misspelling), as are
// duplicate keys, missing keys and values of the wrong type.
//
// Aliases and merge keys are expanded as the file is parsed, within
// bounds that keep the work linear in its size: the descriptors and
// mapping keys they make the parser visit may exceed the nodes the file
// holds by 50,000, and merge keys may nest 64 deep. Past either bound, the
// file is an error naming the line where it was reached.
package config
