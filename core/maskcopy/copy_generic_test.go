//go:build !amd64 || purego

package maskcopy

func useAVX2Flag() []bool { return []bool{false} }

func setAVX2(bool) {}
