// Package detect owns deciding how an app runs from its source tree:
// detectors bid with a score and evidence and propose a spec document
// (internal/spec.Document); the highest bid the runtime can run wins, the
// others are kept as runners-up, and the facts the winner could not find
// are asked as questions whose answers, given back to Detect, are filled
// into the proposals.
//
// Detection is a pure function of an fs.FS, the answers and what the
// runtime can do (a Runtime, given by the caller): it reads only the
// tree, within limits (MaxWalk entries walked, MaxFileBytes of a file,
// MaxReads files and MaxTotalBytes in all), skips node_modules, .git,
// vendor, venv, .venv, __pycache__ and dist when walking, never follows a
// symbolic link, and does no other I/O: no network, no process, no host
// environment (a compose file is interpolated against an empty
// environment). The same tree, answers and runtime give the same Result.
//
// # The runtime
//
// A bid whose proposal has a build kind the runtime does not run (a
// Dockerfile or an image on the process runtime) ranks after every bid it
// can run, whatever the scores, and its evidence says why ("the process
// runtime cannot build Dockerfiles; it builds go, node, python, static,
// command"), at the Dockerfile or the file the bid came from. So a Go
// service that ships a Dockerfile is proposed as a Go build where only
// that runs. When no bid runs, the best still wins, saying why (a plan
// then refuses it). A Runtime that does not list its build kinds ranks by
// score alone; scores never change with the runtime.
//
// # Scores
//
// A score says how sure a detector is that its proposal is how the app
// runs, from 0 to 100. Ties are broken by detector name.
//
//	80–95  an explicit runtime declaration
//	       compose 90 (even with rejected constructs, so that the reason is
//	       seen), Procfile with a web process 85, Dockerfile at the root 80
//	60–79  framework evidence
//	       Next.js, Nuxt, SvelteKit (node adapter), Django 78; Remix,
//	       Astro (node adapter), express/fastify/koa/hono/NestJS/hapi,
//	       Flask, FastAPI, Streamlit, Go main package with a known port
//	       (PORT with a fallback, a port flag, a listen address) 75;
//	       Dockerfile in a subdirectory or under another name 70; Node
//	       static builds (Vite, Create React App, Vue CLI, Parcel, Astro) 70;
//	       Go main package whose port (and command) is asked 65;
//	       SvelteKit without the node adapter 65; a start script alone 60;
//	       index.html at the root of a tree with no server marker 60
//	40–59  a server without a framework
//	       Python standard-library server 55; index.html in public/, dist/,
//	       build/, site/ (and docs/, www/, _site/) 50; Procfile without a
//	       web process 40
//	20–39  weak markers
//	       a Python entry script of no known framework 35; a package.json
//	       that says nothing of how it runs 30; index.html beside a server
//	       marker 20
//
// So, among what the runtime runs, a compose file beats a Procfile, which
// beats a Dockerfile, which beats the language detectors.
//
// # Conventions of proposals
//
// The primary workload of a single-workload proposal is named web. A
// static workload (build kind static) has run.port 0: the runtime serves
// the files of its build context (the directory holding index.html); when
// it also has a build command (a Node static build), the command runs at
// the source root first and writes that directory. A Dockerfile or image
// workload without a run command runs the image's own command. Secrets
// are referred to by name ({secret: NAME}) and asked as questions of kind
// secret with key "secret.<NAME>"; their answers never enter a proposal.
// Other question keys: "port" (the primary workload's port), "run.command"
// (the primary's command, split into words without a shell) and
// "env.<NAME>" (a variable's value). Connection URLs to databases and
// caches become required slots with {slot, field: url}; a variable naming
// a slot service's host becomes {slot, field: host}.
//
// A program is told its port in PORT. One that does not read PORT but
// declares a port flag (flag.Int("port", …), flag.String("addr", …),
// pflag's IntVarP(&p, "http-port", "p", …); not metrics-, grpc- or
// client addresses) is run under sh -c with $PORT in the flag
// (exec ./app --port="$PORT", or --addr=":$PORT" for an address), its
// evidence naming the flag; a Go program that shows no way at all is
// asked its port and its run command (an answer that names a variable,
// ./app -listen :$PORT, runs under sh -c).
//
// It must not import the server, the store or adapters, and must not run
// anything it finds.
package detect
