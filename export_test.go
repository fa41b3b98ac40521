package shard

// RaceEnabled tells the external tests whether the race detector is on (race_test.go).
const RaceEnabled = raceEnabled
