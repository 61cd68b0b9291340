package redis

import "fmt"

// ACLRules returns the rules of a Redis ACL user (ACL SETUSER name on
// >password RULES…) that may use a store under prefix and nothing else:
// the keys and the wake-up channel under the prefix, the commands the
// client sends, and those its scripts run.
func ACLRules(prefix string) string {
	return fmt.Sprintf("resetkeys ~%[1]s:* resetchannels &%[1]s:wake -@all +@connection "+
		"+info +evalsha +eval +scan +subscribe +unsubscribe +wait "+
		"+time +get +set +del +hmget +hget +hset +hsetnx +zadd +zscore +zrange +zrangebyscore +zremrangebyscore +zrem +pexpireat +publish",
		prefix)
}
