package compat

import "testing"

func TestGoRedisVectors(t *testing.T) { checkVectors(t, "goredis", "json") }

func TestGoRedisRefused(t *testing.T) { checkRefused(t, "goredis", "json") }
