module github.com/plugrl/libplugrl

go 1.26.8

require (
	github.com/gobwas/ws v1.5.0
	github.com/klauspost/compress v1.20.4
	github.com/tinylib/msgp v1.6.5
)

require (
	github.com/gobwas/httphead v0.1.0 // indirect
	github.com/philhofer/fwd v1.2.0 // indirect
)

// build.sh's output, where tests/old_glibc.sh mounts its chroot's /proc
// while it runs (or for good, if it is killed): out of ./..., which would
// read /proc and fail ("open build/old-glibc/bullseye/proc/1/fdinfo:
// permission denied").
ignore ./build
