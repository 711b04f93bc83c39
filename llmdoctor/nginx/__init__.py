"""`llmdoctor nginx`: does this nginx config let a streamed LLM response through? (design.md §4)

    config.py     read files / directories / `nginx -T` dumps with crossplane; splice includes as nginx does
    effective.py  http/server/location/if levels and effective values by nginx's inheritance rules
    rules.py      NGX001–NGX007, each a function of one proxied block
    check.py      inputs -> Report (findings with file:line and a fix, input errors)
"""
