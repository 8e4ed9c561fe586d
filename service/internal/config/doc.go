// Package config loads envoyproxy/ratelimit-compatible rule files, validates
// them, and matches request descriptors to rules.
//
// [Load] reads a file or a directory of files into a [Config]; [Config.Match]
// finds the [Rule] for a request descriptor; [Config.Rules] lists every rule,
// and a Rule marshals to JSON as its [RuleView]. A Config is immutable and
// safe for concurrent use: to reload, load a new one and swap the pointer.
//
// The rule-file format, the matching and the differences from
// envoyproxy/ratelimit are documented for operators in docs/SERVICE.md.
// Every problem of a file is an [*Error] wrapping [ErrInvalid], naming the
// file, the line and the field. A file that is not regular is
// [ErrNotRegular]; one past the size caps is [ErrTooLarge].
package config
