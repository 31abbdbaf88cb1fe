"""Reading a live cluster: ``plbjax-dump`` (`dump`) writes SF's REST answers into a dump directory,
``plbjax-import`` (`importer`) turns a dump into a state document. `dumpdir` reads a dump's files,
`fields` names SF's fields, and `nodes`, `services`, `replicas`, `manifest`, `applications` read SF's
answers into the state's entries; `report` collects what the import left out and why.
"""
