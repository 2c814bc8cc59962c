/* embed.S -- files linked into the binary, so the server needs no data
 * directory to answer GET /openapi.yaml. Assembled from the repository
 * root (the Makefile does), where .incbin finds the file. */
    .section .rodata
    .global openapi_yaml
    .global openapi_yaml_end
openapi_yaml:
    .incbin "openapi.yaml"
openapi_yaml_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
