module github.com/planexec/planexec/a2aagent

go 1.26.0

require github.com/planexec/planexec v0.0.0

require golang.org/x/sync v0.24.0 // indirect

require (
	github.com/a2aproject/a2a-go v0.3.3
	github.com/google/uuid v1.6.0 // indirect
)

replace github.com/planexec/planexec => ../
