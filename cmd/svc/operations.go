package main

import (
	"sync"

	"github.com/svchost/svc/api"
	"github.com/svchost/svc/server"
)

// operations are the API's endpoints as its clients see them, from the
// server's route table: the CLI's generated commands and the tool
// server's tools are made from them.
var operations = sync.OnceValue(func() []api.Operation {
	eps := server.Endpoints()
	out := make([]api.Operation, 0, len(eps))
	for _, e := range eps {
		op := api.Operation{
			Name: e.Name, Method: e.Method, Path: e.Path, Summary: e.Summary, Verb: e.Verb, Public: e.Public,
			Paging: e.Paging, Idempotent: e.Idempotent, Body: e.Body, Upload: e.Upload, Produces: e.Produces,
			NoTool: e.NoTool, NoCommand: e.NoCommand,
		}
		for _, q := range e.Query {
			op.Query = append(op.Query, api.QueryParam{Name: q.Name, Type: q.Type, Doc: q.Doc, Repeat: q.Repeat, Default: q.Default, DefaultUnless: q.DefaultUnless})
		}
		out = append(out, op)
	}
	return out
})

// operation returns the operation named name; it panics for a name the
// route table lacks, which the tests of every command catch.
func operation(name string) api.Operation {
	for _, op := range operations() {
		if op.Name == name {
			return op
		}
	}
	panic("svc: no operation " + name)
}
