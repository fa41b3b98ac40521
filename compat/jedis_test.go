package compat

import "testing"

func TestJedisVectors(t *testing.T) { checkVectors(t, "jedis", "json") }

func TestJedisRefused(t *testing.T) { checkRefused(t, "jedis", "json") }
