package redis

import (
	"embed"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leaderrun/leaderrun/lease"
)

// The Lua scripts, one per operation. Each script is common.lua (the
// server's clock and the record's encoding), for group operations
// group.lua, and the operation's own file, so that every operation is one
// EVALSHA (go-redis falls back to EVAL when the server does not have the
// script cached, as after a restart).
//
//go:embed lua/*.lua
var luaFiles embed.FS

type scripts struct {
	acquire, renew, annotate, release, stepDown, get *goredis.Script
	join, renewMember, leave, getGroup               *goredis.Script
	campaign, candidates, withdraw, forget           *goredis.Script
}

// loadScripts loads the scripts; edit, set by tests only, rewrites each
// one's source.
func loadScripts(edit func(string) string) scripts {
	lua := func(names ...string) *goredis.Script {
		var src []byte
		for _, n := range names {
			b, err := luaFiles.ReadFile("lua/" + n + ".lua")
			if err != nil {
				panic(err) // embedded: cannot happen
			}
			src = append(src, b...)
			src = append(src, '\n')
		}
		if edit != nil {
			return goredis.NewScript(edit(string(src)))
		}
		return goredis.NewScript(string(src))
	}
	return scripts{
		acquire:     lua("common", "acquire"),
		renew:       lua("common", "renew"),
		annotate:    lua("common", "annotate"),
		release:     lua("common", "release"),
		stepDown:    lua("common", "stepdown"),
		get:         lua("common", "get"),
		join:        lua("common", "group", "join"),
		renewMember: lua("common", "group", "renewmember"),
		leave:       lua("common", "group", "leave"),
		getGroup:    lua("common", "group", "getgroup"),
		campaign:    lua("common", "campaign"),
		candidates:  lua("common", "candidates"),
		withdraw:    lua("common", "withdraw"),
		forget:      lua("common", "forget"),
	}
}

// keys names the store's Redis keys under a prefix P:
//
//	P:lease:{NAME}       the lease record of NAME (a hash)
//	P:token:{NAME}       the last token granted for NAME (a string, never expires)
//	P:cand:{NAME}        NAME's candidates (a sorted set: holder → seen until)
//	P:cattr:{NAME}       what they said when they campaigned (a sorted set:
//	                     "HOLDER\x00ATTRIBUTES" → seen until; see lua/common.lua)
//	P:lease:{GROUP} #3   partition 3 of GROUP; likewise token, cand and cattr
//	P:group:{GROUP}      GROUP's number of partitions (a hash)
//	P:members:{GROUP}    GROUP's members (a sorted set: identity → expiry)
//
// The braces are Redis Cluster hash tags: every key a script touches (a
// name's four keys; a group's own keys and all its partitions' records)
// hashes to one slot.
type keys struct {
	prefix string // "P:"
}

func (k keys) lease(name string) string { return k.of("lease", name) }
func (k keys) token(name string) string { return k.of("token", name) }
func (k keys) cand(name string) string  { return k.of("cand", name) }
func (k keys) cattr(name string) string { return k.of("cattr", name) }

func (k keys) of(kind, name string) string {
	if group, p, ok := lease.SplitPartitionKey(name); ok {
		return k.partitionStem(kind, group) + strconv.Itoa(p)
	}
	return k.prefix + kind + ":{" + name + "}"
}

// partitionStem is the key of group's partition p of kind without p.
func (k keys) partitionStem(kind, group string) string {
	return k.prefix + kind + ":{" + group + "} #"
}

func (k keys) group(group string) string   { return k.prefix + "group:{" + group + "}" }
func (k keys) members(group string) string { return k.prefix + "members:{" + group + "}" }

// leasePattern matches every lease record's key, for SCAN, and no key of
// another prefix: a prefix has no braces, so no other prefix's key has
// "{" where this one has it ("P:lease:*" would match the keys of a prefix
// "P:lease").
func (k keys) leasePattern() string { return k.prefix + "lease:{*" }
