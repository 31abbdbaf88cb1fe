from plbjax.sf.live.record.recorder import main

main()
