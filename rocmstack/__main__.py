from rocmstack.entry import main

main()
