//go:build !race

package spreadsheet

// slowdown scales time limits in tests under the race detector.
const slowdown = 1
