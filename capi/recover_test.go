package main

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
)

// A panic cannot be provoked through the C ABI on purpose (every input a
// caller can give is checked first), so the misuse test cannot see whether
// a recover is in place. These tests can: without them, removing the
// recover from done, recoverPlain or recoverString, or the defer from an
// export, passed every test, and the first bug that panicked would take the
// host process down instead of returning PLUGRL_INTERNAL.

// TestDoneRecovers: a panic inside a call on a handle becomes
// PLUGRL_INTERNAL, with the panic's value in the handle's message, and the
// handle is left (not busy for ever).
func TestDoneRecovers(t *testing.T) {
	internal := statusOf(errors.New("not a client.Error")) // PLUGRL_INTERNAL
	var h handleBase
	h.busy.Store(true)        // as enter leaves it
	st := internal - internal // PLUGRL_OK, of the C type a test file cannot name
	func() {
		defer h.done(&st)
		panic("boom in a call")
	}()
	if st != internal {
		t.Fatalf("status %d after a panic; want PLUGRL_INTERNAL (%d)", st, internal)
	}
	if h.busy.Load() {
		t.Fatal("the handle is still busy after a call that panicked")
	}
	if !strings.Contains(h.msg, "internal error") || !strings.Contains(h.msg, "boom in a call") {
		t.Fatalf("message %q; want the internal error and the panic's value", h.msg)
	}

	var o handleBase
	st = 0
	func() {
		defer o.recoverTo(&st)
		panic("boom in open")
	}()
	if st != internal || !strings.Contains(o.msg, "boom in open") {
		t.Fatalf("recoverTo: status %d, message %q; want PLUGRL_INTERNAL with the panic's value", st, o.msg)
	}
}

// TestRecoverPlainAndString: the wrappers of the exports with no handle to
// hold a message.
func TestRecoverPlainAndString(t *testing.T) {
	internal := statusOf(errors.New("not a client.Error"))
	st := internal - internal // PLUGRL_OK, of the C type a test file cannot name
	func() {
		defer recoverPlain(&st)
		panic("boom")
	}()
	if st != internal {
		t.Fatalf("recoverPlain: status %d after a panic; want PLUGRL_INTERNAL (%d)", st, internal)
	}
	s := emptyString
	func() {
		defer recoverString(&s)
		panic("boom")
	}()
	if s != internalText {
		t.Fatal("recoverString: a panic did not give the static \"internal error\" text")
	}
}

// TestExportsRecover: every //export function defers one of the recovering
// wrappers (or is one of the few that cannot panic, or hands the whole call
// to a method that defers one): the source is read, so a defer removed
// from one export fails here, which no call from C can show.
func TestExportsRecover(t *testing.T) {
	recovering := map[string]bool{"done": true, "recoverTo": true, "recoverPlain": true, "recoverString": true}
	// Exports whose whole body cannot panic, or is one call to a method
	// checked below.
	exempt := map[string]string{
		"plugrl__go_options_size_0_1": "returns a constant",
		"plugrl__go_bind_thread":      "fitProcs only; no caller input",
		"plugrl__go_close":            "handles.close defers recoverPlain",
		"plugrl__go_runner_free":      "handles.close defers recoverPlain",
		"plugrl__go_errmsg":           "handles.errmsg defers recoverString",
		"plugrl__go_runner_errmsg":    "handles.errmsg defers recoverString",
	}
	// The methods the exempt exports hand their calls to.
	methods := map[string]bool{"close": false, "errmsg": false}

	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	defers := func(fn *ast.FuncDecl) bool {
		found := false
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			d, ok := n.(*ast.DeferStmt)
			if !ok {
				return true
			}
			switch f := d.Call.Fun.(type) {
			case *ast.Ident:
				found = found || recovering[f.Name]
			case *ast.SelectorExpr:
				found = found || recovering[f.Sel.Name]
			case *ast.FuncLit: // defer func() { if recover() != nil { ... } }()
				ast.Inspect(f.Body, func(n ast.Node) bool {
					if c, ok := n.(*ast.CallExpr); ok {
						if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "recover" {
							found = true
						}
					}
					return true
				})
			}
			return true
		})
		return found
	}
	exports := 0
	for _, pkg := range pkgs {
		for _, file := range pkg.Files {
			for _, decl := range file.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok {
					continue
				}
				if fn.Recv != nil {
					if _, ok := methods[fn.Name.Name]; ok && strings.Contains(types(fn.Recv), "handles") {
						methods[fn.Name.Name] = defers(fn)
					}
					continue
				}
				if fn.Doc == nil || !hasExport(fn.Doc) {
					continue
				}
				exports++
				if _, ok := exempt[fn.Name.Name]; ok {
					continue
				}
				if !defers(fn) {
					t.Errorf("%s: an export that defers no recovering wrapper (done, recoverTo, recoverPlain, recoverString): a panic in it would cross into C", fn.Name.Name)
				}
			}
		}
	}
	if exports < 20 {
		t.Fatalf("found %d //export functions; the parse missed them", exports)
	}
	for m, ok := range methods {
		if !ok {
			t.Errorf("handles.%s defers no recovering wrapper, which the exports that call it rely on", m)
		}
	}
}

func hasExport(doc *ast.CommentGroup) bool {
	for _, c := range doc.List {
		if strings.HasPrefix(c.Text, "//export ") {
			return true
		}
	}
	return false
}

func types(fl *ast.FieldList) string {
	var b strings.Builder
	for _, f := range fl.List {
		ast.Inspect(f.Type, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				b.WriteString(id.Name + " ")
			}
			return true
		})
	}
	return b.String()
}
